// Package quantity reads the Kubernetes quantities clients store (in a
// TaskAction's typed resources, its pod template, Flyte's task template) in
// time and memory bounded by the text's length.
//
// resource.ParseQuantity, and with it Quantity's UnmarshalJSON, turns a
// decimal exponent into a power of ten before it caps the value: "1e2147483648"
// never returns, "1e100000000" takes minutes. Every quantity the executor
// parses from client data is checked here first, for its length, its suffix
// and its exponent; only a quantity that passes reaches the library.
package quantity

import (
	"bytes"
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/api/resource"
)

// MaxLength is the longest quantity accepted, in bytes. Canonical quantities
// have a handful of characters; the longest meaningful ones (a value up to
// 2^63 written with nano precision) fit.
const MaxLength = 64

// MaxExponentDigits is how many digits a decimal exponent (1e3, 5E-2) may
// have: the exponent is at most ±99, far beyond any value a quantity keeps
// (they are capped near 2^63 and rounded to 10^-9).
const MaxExponentDigits = 2

// Pattern is the bounded form of a quantity: Kubernetes' own pattern for a
// quantity string with the exponent limited to MaxExponentDigits digits. The
// CRD's schema carries it, with MaxLength, wherever the Go type is a
// resource.Quantity; Check applies exactly it.
const Pattern = `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?[0-9]{1,2}))?$`

var (
	bounded = regexp.MustCompile(Pattern)
	// anyExponent is a quantity whose only fault is the length of its exponent.
	anyExponent = regexp.MustCompile(`^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))[eE](\+|-)?[0-9]+$`)
)

// Check says whether s is a quantity this package lets the library parse: at
// most MaxLength bytes, of Pattern. Its time is linear in len(s) up to
// MaxLength and constant beyond.
func Check(s string) error {
	if len(s) > MaxLength {
		return tooLong(s, len(s))
	}
	if bounded.MatchString(s) {
		return nil
	}
	if anyExponent.MatchString(s) {
		return fmt.Errorf("%q has an exponent of more than %d digits; a quantity's exponent is at most ±99", s, MaxExponentDigits)
	}
	return fmt.Errorf("%q is not a Kubernetes quantity (such as 500m, 1.5, 2Gi, 1e3)", s)
}

// Parse is resource.ParseQuantity of a quantity that passes Check: the one
// way the executor parses a quantity a client wrote.
func Parse(s string) (resource.Quantity, error) {
	if err := Check(s); err != nil {
		return resource.Quantity{}, err
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("%q is not a Kubernetes quantity: %v", s, err)
	}
	return q, nil
}

// CheckJSON checks a JSON value where a resource.Quantity is decoded, as the
// Quantity's UnmarshalJSON reads it (null, a string taken between its quotes
// as it is, or a number), before that method runs.
func CheckJSON(raw []byte) error {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "null" {
		return nil
	}
	switch {
	case len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"':
		raw = raw[1 : len(raw)-1]
	case len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9'):
	default:
		return fmt.Errorf("a quantity is a string or a number, got %s", Show(string(raw)))
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) > MaxLength {
		return tooLong(string(raw[:MaxLength+1]), len(raw))
	}
	return Check(string(raw))
}

func tooLong(s string, n int) error {
	return fmt.Errorf("%s is %d characters long; a quantity has at most %d", Show(s), n, MaxLength)
}

// Show is s quoted for a message, shortened to its first 32 bytes when longer.
func Show(s string) string {
	if len(s) <= 40 {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q…", s[:32])
}
