package storage

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/gcp"
	"golang.org/x/oauth2/google"

	"github.com/taskaction/executor/pkg/config"
)

// openBucket opens loc's bucket with the backend kind and its stow settings;
// hc (GCS, Azure) is an HTTP client made from hcfg.
func openBucket(ctx context.Context, kind string, settings map[string]string, loc Location,
	hcfg config.StorageHTTPClientConfig, hc *http.Client) (*blob.Bucket, error) {
	switch kind {
	case config.StowKindS3:
		client, err := S3Client(ctx, settings, hcfg)
		if err != nil {
			return nil, err
		}
		return s3blobOpen(ctx, client, loc.Bucket)
	case config.StowKindGoogle:
		return openGCS(ctx, settings, loc.Bucket, hc)
	case config.StowKindAzure:
		return openAzure(ctx, settings, loc, hc)
	case config.StowKindLocal:
		return openLocal(settings, loc)
	}
	return nil, fmt.Errorf("unsupported backend kind %q", kind)
}

// S3Options are the S3 client settings a stow s3 config means.
type S3Options struct {
	Region    string
	Endpoint  string // with its scheme; empty: AWS
	PathStyle bool
	// AccessKeyID and SecretKey are set for auth_type accesskey; else the
	// default AWS credential chain (IAM role, environment, profile) is used.
	AccessKeyID, SecretKey string
}

// S3Settings reads a stow s3 config: Flyte's keys and defaults.
func S3Settings(settings map[string]string) (S3Options, error) {
	o := S3Options{Region: settings["region"]}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if ep := settings["endpoint"]; ep != "" {
		if !strings.Contains(ep, "://") {
			scheme := "https://"
			if ssl, _ := strconv.ParseBool(settings["disable_ssl"]); ssl {
				scheme = "http://"
			}
			ep = scheme + ep
		}
		// An S3-compatible service (MinIO and the like) names buckets in the path.
		o.Endpoint, o.PathStyle = ep, true
	}
	switch auth := settings["auth_type"]; auth {
	case "accesskey":
		o.AccessKeyID, o.SecretKey = settings["access_key_id"], settings["secret_key"]
		if p := settings["secret_key_path"]; p != "" {
			b, err := os.ReadFile(p)
			if err != nil {
				return S3Options{}, fmt.Errorf("s3 secret_key_path: %w", err)
			}
			o.SecretKey = strings.TrimSpace(string(b))
		}
		if o.AccessKeyID == "" || o.SecretKey == "" {
			return S3Options{}, errors.New("s3 auth_type accesskey needs access_key_id and secret_key (or secret_key_path)")
		}
	case "", "iam":
	default:
		return S3Options{}, fmt.Errorf("s3 auth_type %q: want iam or accesskey", auth)
	}
	return o, nil
}

// S3Client is an S3 client for a stow s3 config and the storage section's
// HTTP client settings.
//
// The SDK builds the HTTP client (a BuildableClient with hcfg's timeout): it
// adds the CA bundle that AWS_CA_BUNDLE or the profile's ca_bundle names to
// that client's transport, and refuses to load any configuration when it was
// handed a client it cannot add it to. hcfg's headers are added by a wrapper
// of the S3 client's requests only.
func S3Client(ctx context.Context, settings map[string]string, hcfg config.StorageHTTPClientConfig) (*s3.Client, error) {
	o, err := S3Settings(settings)
	if err != nil {
		return nil, err
	}
	hc := awshttp.NewBuildableClient()
	if d := hcfg.Timeout.Duration; d > 0 {
		hc = hc.WithTimeout(d)
	}
	loadOpts := []func(*awsconfig.LoadOptions) error{awsconfig.WithRegion(o.Region), awsconfig.WithHTTPClient(hc)}
	if o.AccessKeyID != "" {
		loadOpts = append(loadOpts, awsconfig.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(o.AccessKeyID, o.SecretKey, "")))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("s3 configuration: %w", err)
	}
	var client aws.HTTPClient = cfg.HTTPClient // with the CA bundle, if any
	if len(hcfg.Headers) > 0 {
		client = headerClient{headers: hcfg.Headers, next: client}
	}
	return s3.NewFromConfig(cfg, func(so *s3.Options) {
		so.HTTPClient = client
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
		so.UsePathStyle = o.PathStyle
		// Checksums only when the service asks: S3-compatible services differ in
		// what they accept.
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	}), nil
}

// headerClient adds headers to every request of an AWS SDK client.
type headerClient struct {
	headers map[string][]string
	next    aws.HTTPClient
}

func (c headerClient) Do(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range c.headers {
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	return c.next.Do(r)
}

func openGCS(ctx context.Context, settings map[string]string, bucket string, hc *http.Client) (*blob.Bucket, error) {
	scopes := strings.Fields(strings.ReplaceAll(settings["scopes"], ",", " "))
	if len(scopes) == 0 {
		scopes = []string{"https://www.googleapis.com/auth/cloud-platform"}
	}
	var creds *google.Credentials
	var err error
	if js := settings["json"]; js != "" {
		creds, err = google.CredentialsFromJSON(ctx, []byte(js), scopes...)
	} else {
		creds, err = google.FindDefaultCredentials(ctx, scopes...)
	}
	if err != nil {
		return nil, fmt.Errorf("google credentials: %w", err)
	}
	transport := hc.Transport
	if transport == nil {
		transport = gcp.DefaultTransport()
	}
	client, err := gcp.NewHTTPClient(transport, gcp.CredentialsTokenSource(creds))
	if err != nil {
		return nil, err
	}
	client.Timeout = hc.Timeout
	return gcsblob.OpenBucket(ctx, client, bucket, nil)
}

func openAzure(ctx context.Context, settings map[string]string, loc Location, hc *http.Client) (*blob.Bucket, error) {
	account := loc.Account
	if account == "" {
		account = settings["account"]
	}
	if account == "" {
		return nil, errors.New("azure: no storage account (set storage.stow.config.account, or use abfs://container@account...)")
	}
	suffix := settings["configDomainSuffix"]
	if suffix == "" {
		suffix = "core.windows.net"
	}
	svcURL := fmt.Sprintf("https://%s.blob.%s/", account, suffix)
	var client *container.Client
	var err error
	if key := settings["key"]; key != "" {
		cred, cerr := azblob.NewSharedKeyCredential(account, key)
		if cerr != nil {
			return nil, fmt.Errorf("azure shared key: %w", cerr)
		}
		opts := &container.ClientOptions{}
		opts.Transport = hc // an *http.Client is an azcore Transporter
		client, err = container.NewClientWithSharedKeyCredential(svcURL+loc.Bucket, cred, opts)
	} else {
		client, err = azureblob.NewDefaultClient(azureblob.ServiceURL(svcURL), azureblob.ContainerName(loc.Bucket))
	}
	if err != nil {
		return nil, fmt.Errorf("azure client: %w", err)
	}
	return azureblob.OpenBucket(ctx, client, nil)
}

func openLocal(settings map[string]string, loc Location) (*blob.Bucket, error) {
	dir := loc.Bucket
	if !filepath.IsAbs(dir) {
		root := settings["path"]
		if root == "" {
			return nil, fmt.Errorf("file://%s/... names a bucket, which needs a root directory: set storage.stow.config.path (kind local)", loc.Bucket)
		}
		dir = filepath.Join(root, loc.Bucket)
	}
	// No sidecar metadata files: the task's runtime reads and writes the same
	// directories with plain file I/O.
	return fileblob.OpenBucket(dir, &fileblob.Options{CreateDir: true, NoTempDir: true, Metadata: fileblob.MetadataDontWrite})
}
