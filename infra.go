package leasehold

import (
	"embed"
	"io/fs"
)

//go:embed template.yaml functions/Makefile
var infra embed.FS

// Infrastructure returns leasehold's deployment template, template.yaml,
// and functions/Makefile, which builds the template's functions by import
// path. `leasehold init` writes both into a new project's leasehold/
// directory, where the project's own template nests the stack with
// DeployWorker=false and adds its worker function beside it
// (docs/deploy.md). They are the files of the leasehold version the
// program was built with.
func Infrastructure() fs.FS { return infra }
