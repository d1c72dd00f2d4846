package cmp

import (
	"encoding/json"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	workv1 "open-cluster-management.io/api/work/v1"
)

// The condition types the readiness rules make OCM's work agent set on a workload's entry in
// the ManifestWork status (status.resourceStatus.manifests[].conditions). OCM's own Applied
// and Available only say that an object was applied and exists; these say whether it runs.
// Both are positive, so the work-level conditions OCM aggregates from them read right too:
// Ready is True when every workload is, Progressing when any is.
const (
	// ConditionReady is True when the workload is ready: a Deployment, StatefulSet or
	// DaemonSet rolled out with every replica available, a Job complete.
	ConditionReady = "Ready"
	// ConditionProgressing is True while a workload that is not ready may still get there, and
	// False once it is ready or has stopped trying (a Deployment past its progress deadline,
	// a failed Job). Ready=False with Progressing=False is a failed workload.
	ConditionProgressing = "Progressing"
)

// readinessRule is how one workload kind is judged, as CEL over the live object on the
// cluster (`object`): ready; failed, which matters only when it is not ready (it stopped
// progressing); and messages.
type readinessRule struct {
	group, kind, resource string
	ready, failed         string
	// readyMessage and notReady say where the workload stands when it is ready and when not.
	readyMessage, notReady string
}

// field is a CEL value under object, def when it is absent: the API server leaves out counters
// that are zero and fields nobody set. Optional field selection (`.?`) is part of the CEL
// environment OCM's work agent evaluates condition rules in.
func field(path, def string) string {
	return "object.?" + strings.ReplaceAll(path, ".", ".?") + ".orValue(" + def + ")"
}

func str(expr string) string { return "string(" + expr + ")" }

// hasCondition is a CEL test for a status condition of the type (and, when they are set, with
// that status and reason).
func hasCondition(typ, status, reason string) string {
	test := "c.type == '" + typ + "'"
	if status != "" {
		test += " && c.status == '" + status + "'"
	}
	if reason != "" {
		test += " && c.?reason.orValue('') == '" + reason + "'"
	}
	return "object.?status.?conditions.orValue([]).exists(c, " + test + ")"
}

// observed: the workload's controller has seen the current spec.
var observed = field("status.observedGeneration", "0") + " >= object.metadata.generation"

// onDelete: updates wait for someone to delete the pods, so the update is not awaited.
var onDelete = field("spec.updateStrategy.type", "''") + " == 'OnDelete'"

// and joins CEL tests.
func and(tests ...string) string { return "(" + strings.Join(tests, ") && (") + ")" }

// readinessRules follow how Argo CD judges the same kinds' health, except that a DaemonSet
// updated on delete still needs its pods available.
var readinessRules = func() []readinessRule {
	notObserved := "'waiting for the controller to observe generation ' + " + str("object.metadata.generation")
	// of reads "<n> of <total> <what>".
	of := func(n, total, what string) string { return str(n) + " + ' of ' + " + str(total) + " + ' " + what + "'" }

	// Deployment: spec.replicas defaults to 1 on the API server.
	replicas := field("spec.replicas", "1")
	updated := field("status.updatedReplicas", "0")
	total := field("status.replicas", "0")
	available := field("status.availableReplicas", "0")
	deadline := hasCondition("Progressing", "", "ProgressDeadlineExceeded")
	deployReady := and(observed, updated+" >= "+replicas, total+" <= "+updated, available+" >= "+updated)
	deploy := readinessRule{group: "apps", kind: "Deployment", resource: "deployments",
		ready:        deployReady,
		failed:       and(observed, deadline),
		readyMessage: of(available, replicas, "replicas available"),
		notReady: "!(" + observed + ") ? " + notObserved +
			" : " + deadline + " ? 'progress deadline exceeded: ' + " + of(available, replicas, "replicas available") +
			" : " + updated + " < " + replicas + " ? " + of(updated, replicas, "replicas updated") +
			" : " + total + " > " + updated + " ? " + str(total+" - "+updated) + " + ' old replicas pending termination'" +
			" : " + of(available, updated, "updated replicas available"),
	}

	// StatefulSet: a partitioned rolling update is done when the pods above the partition are
	// updated; otherwise when the current revision is the update revision.
	ready := field("status.readyReplicas", "0")
	partition := field("spec.updateStrategy.rollingUpdate.partition", "0")
	// Revisions not reported yet never match.
	revisions := field("status.currentRevision", "''") + " == " + field("status.updateRevision", "'-'")
	rolled := onDelete + " || (" + partition + " > 0 ? " + updated + " >= " + replicas + " - " + partition + " : " + revisions + ")"
	stsReady := and(observed, ready+" >= "+replicas, rolled)
	sts := readinessRule{group: "apps", kind: "StatefulSet", resource: "statefulsets",
		ready:        stsReady,
		failed:       "false",
		readyMessage: of(ready, replicas, "replicas ready"),
		notReady: "!(" + observed + ") ? " + notObserved +
			" : " + ready + " < " + replicas + " ? " + of(ready, replicas, "replicas ready") +
			" : 'rolling update in progress: ' + " + of(updated, replicas, "replicas updated"),
	}

	// DaemonSet: one pod on every node it is scheduled to.
	desired := field("status.desiredNumberScheduled", "0")
	dsUpdated := field("status.updatedNumberScheduled", "0")
	dsAvailable := field("status.numberAvailable", "0")
	dsRolled := onDelete + " || " + dsUpdated + " >= " + desired
	dsReady := and(observed, dsRolled, dsAvailable+" >= "+desired)
	ds := readinessRule{group: "apps", kind: "DaemonSet", resource: "daemonsets",
		ready:        dsReady,
		failed:       "false",
		readyMessage: of(dsAvailable, desired, "scheduled pods available"),
		notReady: "!(" + observed + ") ? " + notObserved +
			" : !(" + dsRolled + ") ? " + of(dsUpdated, desired, "scheduled pods updated") +
			" : " + of(dsAvailable, desired, "scheduled pods available"),
	}

	// Job: ready once complete, failed once Failed.
	complete := hasCondition("Complete", "True", "")
	jobFailed := hasCondition("Failed", "True", "")
	failedReason := "object.status.conditions.filter(c, c.type == 'Failed' && c.status == 'True')[0].?reason.orValue('Failed')"
	job := readinessRule{group: "batch", kind: "Job", resource: "jobs",
		ready:        complete,
		failed:       jobFailed,
		readyMessage: "'complete'",
		notReady: jobFailed + " ? 'failed: ' + " + failedReason +
			" : " + str(field("status.active", "0")) + " + ' active, ' + " + str(field("status.succeeded", "0")) +
			" + ' succeeded, ' + " + str(field("status.failed", "0")) + " + ' failed pods'",
	}
	return []readinessRule{deploy, sts, ds, job}
}()

// conditionRules are the two rules of a kind: Ready, and Progressing (neither ready nor
// failed). Both carry the same message, which says where the workload stands.
func (r readinessRule) conditionRules() []workv1.ConditionRule {
	rule := func(condition, expr, isReady, message string) workv1.ConditionRule {
		return workv1.ConditionRule{
			Condition:         condition,
			Type:              workv1.CelConditionExpressionsType,
			CelExpressions:    []string{expr},
			Message:           message,
			MessageExpression: isReady + " ? " + r.readyMessage + " : " + r.notReady,
		}
	}
	return []workv1.ConditionRule{
		// A message expression's result is its own rule's outcome.
		rule(ConditionReady, r.ready, "result", r.kind+" readiness"),
		rule(ConditionProgressing, and("!("+r.ready+")", "!("+r.failed+")"), "("+r.ready+")", r.kind+" progress"),
	}
}

// readinessConfigs asks OCM's work agent to judge the readiness of the workloads among the
// manifests: one entry per workload kind present, for every object of that kind in the work
// (name and namespace "*"), so its size does not grow with the number of workloads.
func readinessConfigs(manifests []workv1.Manifest) []workv1.ManifestConfigOption {
	present := map[schema.GroupKind]bool{}
	for _, m := range manifests {
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if json.Unmarshal(m.Raw, &tm) != nil {
			continue
		}
		gv, err := schema.ParseGroupVersion(tm.APIVersion)
		if err != nil {
			continue
		}
		present[schema.GroupKind{Group: gv.Group, Kind: tm.Kind}] = true
	}
	var out []workv1.ManifestConfigOption
	for _, r := range readinessRules {
		if !present[schema.GroupKind{Group: r.group, Kind: r.kind}] {
			continue
		}
		out = append(out, workv1.ManifestConfigOption{
			ResourceIdentifier: workv1.ResourceIdentifier{Group: r.group, Resource: r.resource, Name: "*", Namespace: "*"},
			ConditionRules:     r.conditionRules(),
		})
	}
	return out
}
