package certs

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// maxSecretRounds bounds the create/get/update rounds against other replicas.
// Each lost round means another replica's write succeeded, so a few suffice.
const maxSecretRounds = 5

// EnsureSecret returns the chain stored in the Secret key, creating it if it
// does not exist and replacing it if it cannot serve hosts. Replicas racing
// here agree: a create that finds the Secret already there, and an update
// that conflicts, read the winner's Secret and use it.
func EnsureSecret(ctx context.Context, c client.Client, key types.NamespacedName, hosts []string, now time.Time) (Bundle, tls.Certificate, error) {
	var lastErr error
	for range maxSecretRounds {
		sec := &corev1.Secret{}
		err := c.Get(ctx, key, sec)
		switch {
		case apierrors.IsNotFound(err):
			b, pair, err := generateChecked(hosts, now)
			if err != nil {
				return Bundle{}, tls.Certificate{}, err
			}
			sec = &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: map[string]string{
					"app.kubernetes.io/name":       "executor",
					"app.kubernetes.io/component":  "webhook",
					"app.kubernetes.io/managed-by": "executor",
				}},
				Type: corev1.SecretTypeOpaque,
				Data: b.data(),
			}
			err = c.Create(ctx, sec)
			if err == nil {
				return b, pair, nil
			}
			if !apierrors.IsAlreadyExists(err) {
				return Bundle{}, tls.Certificate{}, fmt.Errorf("create Secret %s: %w", key, err)
			}
			lastErr = err // another replica won: read its Secret
		case err != nil:
			return Bundle{}, tls.Certificate{}, fmt.Errorf("read Secret %s: %w", key, err)
		default:
			b := Bundle{CA: sec.Data[KeyCA], Cert: sec.Data[KeyCert], Key: sec.Data[KeyKey]}
			pair, checkErr := b.Check(hosts, now)
			if checkErr == nil {
				return b, pair, nil
			}
			nb, npair, err := generateChecked(hosts, now)
			if err != nil {
				return Bundle{}, tls.Certificate{}, err
			}
			// The resourceVersion of the read makes this update lose to any
			// other replica's replacement in between.
			sec.Data = nb.data()
			err = c.Update(ctx, sec)
			if err == nil {
				return nb, npair, nil
			}
			if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				return Bundle{}, tls.Certificate{}, fmt.Errorf("replace Secret %s (%v): %w", key, checkErr, err)
			}
			lastErr = err
		}
	}
	return Bundle{}, tls.Certificate{}, fmt.Errorf("Secret %s kept changing under %d attempts: %w", key, maxSecretRounds, lastErr)
}

func generateChecked(hosts []string, now time.Time) (Bundle, tls.Certificate, error) {
	b, err := Generate(hosts, now)
	if err != nil {
		return Bundle{}, tls.Certificate{}, err
	}
	pair, err := b.Check(hosts, now)
	if err != nil {
		return Bundle{}, tls.Certificate{}, fmt.Errorf("generated certificate is unusable: %w", err)
	}
	return b, pair, nil
}

func (b Bundle) data() map[string][]byte {
	return map[string][]byte{KeyCA: b.CA, KeyCert: b.Cert, KeyKey: b.Key}
}
