package claimcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// S3API is the part of the S3 client that S3 calls, with the SDK's
// signatures, so *s3.Client satisfies it.
type S3API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
}

// S3 is a Blobs in an S3 bucket. Objects are written with server-side
// encryption (SSE-S3), whatever the bucket's default.
type S3 struct {
	Client S3API
	Bucket string
	// CallTimeout bounds each call (0: 30s, long enough for a 10 MiB
	// object on a slow link, where a DynamoDB call gets 5s).
	CallTimeout time.Duration
}

// NewS3Client is the S3 client of cfg for the payload bucket; endpoint, if
// set, overrides cfg's (a client's ClientConfig.Endpoint, which receives
// every call). A local endpoint (AWS_ENDPOINT_URL_S3, a LocalStack at
// 127.0.0.1) has no DNS for virtual-hosted bucket names, so any endpoint
// of its own is addressed by path.
func NewS3Client(cfg aws.Config, endpoint string) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		if o.BaseEndpoint != nil && *o.BaseEndpoint != "" {
			o.UsePathStyle = true
		}
	})
}

func (s *S3) timeout() time.Duration {
	if s.CallTimeout > 0 {
		return s.CallTimeout
	}
	return defaultCallTimeout
}

const defaultCallTimeout = 30 * time.Second

// Put stores value under key, encrypted.
func (s *S3) Put(ctx context.Context, key string, value []byte) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	_, err := s.Client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:               &s.Bucket,
		Key:                  &key,
		Body:                 bytes.NewReader(value),
		ContentLength:        aws.Int64(int64(len(value))),
		ContentType:          aws.String("application/json"),
		ServerSideEncryption: s3types.ServerSideEncryptionAes256,
	})
	if err != nil {
		return fmt.Errorf("put s3://%s/%s: %w", s.Bucket, key, err)
	}
	return nil
}

// Get reads the value under key.
func (s *S3) Get(ctx context.Context, key string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	out, err := s.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.Bucket, Key: &key})
	if err != nil {
		var missing *s3types.NoSuchKey
		if errors.As(err, &missing) {
			return nil, fmt.Errorf("get s3://%s/%s: %w", s.Bucket, key, ErrNotFound)
		}
		return nil, fmt.Errorf("get s3://%s/%s: %w", s.Bucket, key, err)
	}
	defer out.Body.Close()
	value, err := io.ReadAll(io.LimitReader(out.Body, MaxValueBytes+1))
	if err != nil {
		return nil, fmt.Errorf("get s3://%s/%s: %w", s.Bucket, key, err)
	}
	return value, nil
}

// Delete removes key.
func (s *S3) Delete(ctx context.Context, key string) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	if _, err := s.Client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.Bucket, Key: &key}); err != nil {
		return fmt.Errorf("delete s3://%s/%s: %w", s.Bucket, key, err)
	}
	return nil
}
