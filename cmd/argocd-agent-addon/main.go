// Command argocd-agent-addon runs the hub controllers and their tools.
package main

import (
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/cmd"
)

func main() {
	if err := cmd.NewRootCommand().ExecuteContext(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
