// Package serve runs a leasehold worker of your own as one long-lived
// process off Lambda, together with the intake dispatcher when an intake
// queue is configured: what `leasehold run --intake-queue-url` does for
// leasehold's example kinds, for a main package of yours (the project that
// `leasehold init` writes calls it). On AWS the dispatcher is leasehold's
// dispatch function instead, on the intake queue's event source mapping.
package serve

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awsenv"
	"github.com/leasehold/leasehold/internal/defaults"
	"github.com/leasehold/leasehold/internal/dispatch"
	"github.com/leasehold/leasehold/internal/lambdalog"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
	iserve "github.com/leasehold/leasehold/internal/serve"
	"github.com/leasehold/leasehold/settings"
)

// RunFromEnv runs w until ctx is done, as w.Run(ctx) does. When
// LEASEHOLD_INTAKE_QUEUE_URL is set it also runs the dispatcher on that
// queue: each submission becomes a task in LEASEHOLD_TABLE and a dispatch
// token on LEASEHOLD_WORK_QUEUE_URL; an invalid one goes to
// LEASEHOLD_INTAKE_DLQ_URL with its reason (or, unset, is left to the
// queue's redrive policy). The dispatcher reads the variables leasehold's
// dispatch function reads (LEASEHOLD_DISPATCH_GRACE, LEASEHOLD_MAX_ATTEMPTS,
// LEASEHOLD_LISTING, ...) and logs JSON lines on stderr at
// LEASEHOLD_LOG_LEVEL. A part that stops with an error stops the other,
// and RunFromEnv returns that error; a bad variable wraps
// leasehold.ErrConfig. The dispatcher's SDK clients use a copy of awsCfg
// whose HTTPClient is behind leasehold.GuardHTTP, as w's do.
func RunFromEnv(ctx context.Context, awsCfg aws.Config, w *leasehold.Worker) error {
	intakeURL := os.Getenv(settings.EnvIntakeQueueURL)
	if intakeURL == "" {
		return w.Run(ctx)
	}
	ds, err := dispatch.SettingsFromEnv()
	if err != nil {
		return fmt.Errorf("%w: intake dispatcher: %w", leasehold.ErrConfig, err)
	}
	// The dispatcher's calls are the first of awsCfg: without credentials
	// they would fail with the SDK's whole provider chain.
	if err := awsenv.CheckCredentials(ctx, awsCfg, "", defaults.ClientCallTimeout); err != nil {
		return fmt.Errorf("%w: intake dispatcher: %w", leasehold.ErrConfig, err)
	}
	log := ds.Logger // LEASEHOLD_LOG_LEVEL's
	if log == nil {
		log = lambdalog.New(os.Stderr, slog.LevelInfo)
	}
	awsCfg.HTTPClient = awsenv.GuardHTTP(awsCfg.HTTPClient) // awsCfg is a copy
	q := sqs.NewFromConfig(awsCfg)
	store := dynamo.New(dynamodb.NewFromConfig(awsCfg), ds.Table, ds.StoreOptions())
	d, err := dispatch.New(ds.Config(store, q, log.With("part", "dispatch")))
	if err != nil {
		return fmt.Errorf("%w: intake dispatcher: %w", leasehold.ErrConfig, err)
	}
	err = iserve.Run(ctx, iserve.Config{
		Worker:     w,
		Dispatcher: d, IntakeSQS: q, IntakeQueueURL: intakeURL,
		Logger: log,
	})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
