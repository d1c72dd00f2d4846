package manager

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/sharing"
)

// shareStrings runs transform, then shares the object's metadata (sharing.ObjectMeta). Every
// object decoded from the API server carries its own copy of each of them: at 10,000
// clusters the cache holds some 60,000 objects whose labels repeat the same few keys and
// owner names, and whose namespaces repeat the cluster names.
func shareStrings(transform toolscache.TransformFunc) toolscache.TransformFunc {
	return func(o any) (any, error) {
		if transform != nil {
			var err error
			if o, err = transform(o); err != nil {
				return nil, err
			}
		}
		obj, ok := o.(metav1.Object)
		if !ok {
			return o, nil
		}
		sharing.ObjectMeta(obj)
		return o, nil
	}
}
