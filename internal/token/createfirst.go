package token

import (
	"crypto/rand"
	"strings"
)

// createFirstPrefix starts the create token of a sender that waits for the
// receiver of its token to store the task (dispatch's CreateWait). The
// tokens the sender draws otherwise (rand.Text: base32, A-Z and 2-7) never
// hold a '-', so the prefix cannot be met by chance.
const createFirstPrefix = "w-"

// NewCreateFirst draws a create token that asks the worker to create the
// task first: the sender has not stored it and waits for the worker's
// create (docs/tokens.md, "Sent before the create").
func NewCreateFirst() string { return createFirstPrefix + rand.Text() }

// CreateFirst reports whether createToken asks the worker to create the
// task (claimed, one write) before trying to claim a stored one. It only
// orders the worker's two writes: both orders are correct for any create
// token, the other one costing a failed condition more.
func CreateFirst(createToken string) bool {
	return strings.HasPrefix(createToken, createFirstPrefix)
}
