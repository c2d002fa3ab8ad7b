module github.com/leasehold/leasehold

go 1.26

require github.com/jonboulle/clockwork v0.5.0
