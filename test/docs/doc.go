// Package docs checks the documentation against the code it describes:
//
//   - TestExamplesApply creates every object of examples/*.yaml on a real API server (the
//     project's CRDs and OCM's, Argo CD's and cert-manager's installed), with server-side dry
//     run and strict field validation, and fails with the file of any object it refuses;
//   - TestDocYAMLIsInExamples: every complete object the README or docs/ shows in a yaml code
//     block is, word for word, in one of examples/*.yaml, so what the pages show is applied too;
//   - TestRelativeLinksResolve: every relative link of README.md and docs/*.md names an
//     existing file or folder and, with a #fragment, a heading of that Markdown file;
//   - TestManagerFlagsExist: every --flag written in code in README.md and docs/*.md is a flag
//     of `argocd-agent-addon manager`, unless otherPrograms lists it as another program's;
//   - TestTroubleshootingCoversConditions: every condition type and reason declared in
//     apis/v1alpha1 appears in docs/troubleshooting.md;
//   - TestAgentCallsTableIsTheCodes: docs/compatibility.md's table of argocd-agent's agent calls
//     per release is the one pkg/addon makes from the list the agent template's RBAC is tested
//     against.
//
// Only TestExamplesApply needs an API server (KUBEBUILDER_ASSETS, as make test sets it); it is
// skipped with -short.
package docs
