// Package bedrock is the Amazon Bedrock Runtime family (channel type
// "bedrock"): chat through the Converse and ConverseStream APIs,
// {base_url}/model/{modelId}/converse(-stream), signed with AWS Signature
// Version 4 ("key ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN]") or
// sent with a Bedrock API key as a Bearer token (a key without colons).
// Streams come in AWS's binary event-stream framing, which the package
// reads frame by frame into the host's one stream loop (FrameReader).
//
// No client speaks Bedrock's shape, so nothing is passed through: every
// dialect's requests and answers are translated. It registers the Caddy
// module gateway.adapters.bedrock and must not import caddymodule or store.
package bedrock

import (
	"cmp"
	"fmt"
	"net/http"
	"regexp"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/caddyopts"
)

// Name is the family's name, and the wire dialect no client speaks.
const Name = "bedrock"

// DefaultRegion is the region of a channel that names none.
const DefaultRegion = "us-east-1"

func init() {
	caddy.RegisterModule(Adapter{})
}

// Adapter is the Bedrock Runtime provider.
type Adapter struct {
	// Region is the AWS region the channel's requests are signed for and,
	// without a base_url, sent to. Default us-east-1.
	Region string `json:"region,omitempty"`

	// Batch inference (batch.go): the S3 location batches are staged in
	// (s3://bucket/prefix) and the service role Bedrock reads and writes
	// it with. Without both, the channel's batches run on the gateway.
	BatchBucket  string `json:"batch_bucket,omitempty"`
	BatchRoleARN string `json:"batch_role_arn,omitempty"`
	// BatchMinRecords is the fewest lines sent as a batch job (AWS's
	// quota, 100 by default); a smaller batch runs on the gateway.
	BatchMinRecords int `json:"batch_min_records,omitempty"`
	// BatchControlURL and BatchS3URL replace the region's Bedrock control
	// plane and S3 addresses (a VPC endpoint, a test); S3 is then
	// addressed path-style, {url}/{bucket}/{key}.
	BatchControlURL string `json:"batch_control_url,omitempty"`
	BatchS3URL      string `json:"batch_s3_url,omitempty"`

	signer, s3signer *signer
}

// CaddyModule returns the Caddy module information.
func (Adapter) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "gateway.adapters.bedrock",
		New: func() caddy.Module { return new(Adapter) },
	}
}

// Provision fills the defaults.
func (a *Adapter) Provision(caddy.Context) error {
	a.Region = cmp.Or(a.Region, DefaultRegion)
	a.signer = newSigner()
	a.s3signer = newS3Signer()
	if a.BatchMinRecords == 0 {
		a.BatchMinRecords = DefaultBatchMinRecords
	}
	return nil
}

// regionName is what an AWS region id looks like: it becomes part of a host name.
var regionName = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d+$`)

// Validate refuses a region that is no AWS region id.
func (a *Adapter) Validate() error {
	if !regionName.MatchString(a.Region) {
		return fmt.Errorf("bedrock: region %q is not an AWS region id such as us-east-1", a.Region)
	}
	return a.validateBatch()
}

// UnmarshalCaddyfile reads the adapter's options:
//
//	type bedrock {
//		region <aws-region>
//		batch_bucket s3://<bucket>[/<prefix>]
//		batch_role_arn arn:aws:iam::<account>:role/<name>
//		batch_min_records <n>
//		batch_control_url <url>
//		batch_s3_url <url>
//	}
func (a *Adapter) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return caddyopts.UnmarshalOptions(d, func(opt, v string) error {
		switch opt {
		case "region":
			a.Region = v
		case "batch_bucket":
			a.BatchBucket = v
		case "batch_role_arn":
			a.BatchRoleARN = v
		case "batch_min_records":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return d.Errf("batch_min_records %q is not a whole number of at least 1", v)
			}
			a.BatchMinRecords = n
		case "batch_control_url":
			a.BatchControlURL = v
		case "batch_s3_url":
			a.BatchS3URL = v
		default:
			return d.Errf("unrecognized bedrock adapter option %q (it takes region, batch_bucket, batch_role_arn, batch_min_records, batch_control_url, batch_s3_url)", opt)
		}
		return nil
	})
}

// Type implements adapters.Provider.
func (Adapter) Type() string { return Name }

// WireDialect implements adapters.ChatProvider. No client dialect has
// this name, so every request is translated.
func (Adapter) WireDialect() string { return Name }

// DefaultBaseURL implements adapters.BaseURLDefaulter: the region's public
// endpoint; base_url overrides it (a VPC endpoint, a test).
func (a Adapter) DefaultBaseURL() string {
	return "https://bedrock-runtime." + cmp.Or(a.Region, DefaultRegion) + ".amazonaws.com"
}

// UpstreamRequestID implements adapters.RequestIDReader.
func (Adapter) UpstreamRequestID(h http.Header) string { return h.Get("X-Amzn-Requestid") }

// Interface guards.
var (
	_ caddy.Module              = (*Adapter)(nil)
	_ caddy.Provisioner         = (*Adapter)(nil)
	_ caddy.Validator           = (*Adapter)(nil)
	_ caddyfile.Unmarshaler     = (*Adapter)(nil)
	_ adapters.Provider         = (*Adapter)(nil)
	_ adapters.ChatProvider     = (*Adapter)(nil)
	_ adapters.FrameReader      = (*Adapter)(nil)
	_ adapters.RequestIDReader  = (*Adapter)(nil)
	_ adapters.BaseURLDefaulter = (*Adapter)(nil)
	_ adapters.StreamStep       = (*streamStep)(nil)
	_ adapters.EventReader      = (*frameReader)(nil)
)
