// Command probe prints version.String for TestLinkerStampsTheBuild.
package main

import (
	"fmt"

	"github.com/sluice-dev/sluice/internal/version"
)

func main() { fmt.Print(version.String("probe")) }
