package bedrock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// service is the SigV4 signing name of Bedrock Runtime.
const service = "bedrock"

// signer signs requests with SigV4. The SDK's signer keeps the derived
// signing keys of the day, so a channel's requests do not each run the
// four HMACs of the key derivation.
type signer struct{ v4 *v4.Signer }

func newSigner() *signer { return &signer{v4: v4.NewSigner()} }

// fallbackSigner serves an adapter used without Provision (a test's zero value).
var fallbackSigner = newSigner()

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
	if err := s.v4.SignHTTP(ctx, creds, hr, hex.EncodeToString(sum[:]), service, a.region(), time.Now()); err != nil {
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
