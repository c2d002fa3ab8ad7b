package leasemem_test

import (
	"testing"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
	"github.com/leasehold/leasehold/internal/lease/leasetest"
)

func TestAdminConformance(t *testing.T) {
	t.Parallel()
	leasetest.RunAdmin(t, func(t *testing.T, opts lease.Options) leasetest.AdminStore {
		return leasemem.New(opts)
	})
}
