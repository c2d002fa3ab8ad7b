package scaffold

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// FleetExampleMarker is the line of docs/deploy.md that the second-fleet
// example's ```yaml block follows.
const FleetExampleMarker = "<!-- fleet-example -->"

// fleetExample reads the second-fleet example of docs/deploy.md under
// leasehold's checkout root: template resources, indented as entries of a
// template's Resources. The tests add it to a generated project's template
// and check it as they check the project's own worker.
func fleetExample(root string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(root, "docs", "deploy.md"))
	if err != nil {
		return "", err
	}
	_, after, ok := strings.Cut(string(raw), "\n"+FleetExampleMarker+"\n```yaml\n")
	if !ok {
		return "", fmt.Errorf("docs/deploy.md has no ```yaml block after %s", FleetExampleMarker)
	}
	block, _, ok := strings.Cut(after, "\n```\n")
	if !ok {
		return "", fmt.Errorf("docs/deploy.md: the block after %s does not end", FleetExampleMarker)
	}
	return block + "\n", nil
}

// addResources inserts resources (entries indented by two spaces) at the
// top of the Resources section of a template's text.
func addResources(template, resources string) (string, error) {
	before, after, ok := strings.Cut(template, "\nResources:\n")
	if !ok {
		return "", fmt.Errorf("the template has no Resources section")
	}
	return before + "\nResources:\n" + resources + "\n" + after, nil
}

// AddFleetExample adds the second-fleet example of docs/deploy.md (under
// leasehold's checkout root) to the project template at path.
func AddFleetExample(root, path string) error {
	example, err := fleetExample(root)
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	text, err := addResources(string(raw), example)
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(text), 0o644)
}
