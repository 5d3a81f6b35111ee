package bedrock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// service is the SigV4 signing name of Bedrock Runtime.
const service = "bedrock"

// signer signs requests with SigV4, one SDK signer per key: the SDK's
// signer keeps the day's derived signing key by access key id alone, so
// a key whose secret changed under the same id (or two keys alternating)
// must not share one. Each keeps its derived key, so a channel's requests
// do not each run the four HMACs of the derivation.
type signer struct {
	mu   sync.Mutex
	by   map[string]*v4.Signer
	opts []func(*v4.SignerOptions)
}

// maxSigners bounds the signers one channel keeps (its keys are few; a
// channel whose keys change on every reload starts afresh).
const maxSigners = 64

func newSigner() *signer { return &signer{by: map[string]*v4.Signer{}} }

// newS3Signer signs for S3, whose canonical path is the path as sent
// (other services escape it a second time).
func newS3Signer() *signer {
	return &signer{by: map[string]*v4.Signer{}, opts: []func(*v4.SignerOptions){func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }}}
}

func (s *signer) forKey(key string) *v4.Signer {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.by[key]
	if !ok {
		if len(s.by) >= maxSigners {
			clear(s.by)
		}
		v = v4.NewSigner(s.opts...)
		s.by[key] = v
	}
	return v
}

// fallbackSigner and fallbackS3Signer serve an adapter used without
// Provision (a test's zero value).
var (
	fallbackSigner   = newSigner()
	fallbackS3Signer = newS3Signer()
)

// credentials reads a channel key: "ACCESS_KEY_ID:SECRET_ACCESS_KEY" with
// an optional ":SESSION_TOKEN" for SigV4, or a Bedrock API key (no colon).
func credentials(key string) (creds aws.Credentials, apiKey string, err error) {
	if !strings.Contains(key, ":") {
		return aws.Credentials{}, key, nil
	}
	parts := strings.SplitN(key, ":", 3)
	if parts[0] == "" || parts[1] == "" {
		// the message names the form, never the key
		return aws.Credentials{}, "", fmt.Errorf("the channel's bedrock key is not ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN]")
	}
	creds = aws.Credentials{AccessKeyID: parts[0], SecretAccessKey: parts[1]}
	if len(parts) == 3 {
		creds.SessionToken = parts[2]
	}
	return creds, "", nil
}

// authorize puts the channel's credentials on hr, whose body is body: a
// Bearer API key, or a SigV4 signature over the headers set so far and the
// body's hash (so nothing may change them after).
func (a Adapter) authorize(ctx context.Context, hr *http.Request, key string, body []byte) error {
	if key == "" {
		return nil
	}
	creds, apiKey, err := credentials(key)
	if err != nil {
		return err
	}
	if apiKey != "" {
		hr.Header.Set("Authorization", "Bearer "+apiKey)
		return nil
	}
	s := a.signer
	if s == nil {
		s = fallbackSigner
	}
	sum := sha256.Sum256(body)
	if err := s.forKey(key).SignHTTP(ctx, creds, hr, hex.EncodeToString(sum[:]), service, a.region(), time.Now()); err != nil {
		return fmt.Errorf("signing the bedrock request: %w", err)
	}
	return nil
}

func (a Adapter) region() string {
	if a.Region == "" {
		return DefaultRegion
	}
	return a.Region
}
