// Package limiter declares the stores' limiters and the formats of their
// items: concurrency slots per kind (SlotLimiter), start-rate windows per
// queue (RateLimiter) and redrive counts (RedriveCounter). Each lives in an
// item of the tasks table whose id starts with a control character, so no
// task id can name it. Both stores implement the three interfaces; a caller
// checks for them once, where it is built.
package limiter
