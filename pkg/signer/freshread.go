package signer

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// freshReader answers a Get with an object read from the API server by a request that
// started after the Get was called, and lets concurrent callers share that request. The
// signer's confirmation after recording a certificate needs exactly this, no more: a read
// that began after the record. In a renewal wave every request asks about the same
// GitOpsCluster, and one read then serves all the requests recorded while the previous one
// was in flight, instead of one read each.
//
// For one key, at most one read runs at a time. A caller arriving while none runs starts
// one; a caller arriving while one runs waits for the next, which starts when the running one
// ends. ListPage shares one page of a namespace's list the same way; List is passed through.
type freshReader struct {
	client.Reader
	// timeout bounds a shared read, which serves callers with contexts of their own.
	timeout time.Duration

	mu   sync.Mutex
	keys map[string]*freshKey
}

type freshKey struct {
	running bool
	// next is the read that starts when the running one ends; callers join it.
	next *freshRound
}

type freshRound struct {
	done chan struct{}
	obj  runtime.Object
	err  error
}

func newFreshReader(r client.Reader) *freshReader {
	return &freshReader{Reader: r, timeout: 30 * time.Second, keys: map[string]*freshKey{}}
}

// Get reads key into obj from a read started after this call.
func (f *freshReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if len(opts) > 0 {
		return f.Reader.Get(ctx, key, obj, opts...)
	}
	typ := reflect.TypeOf(obj)
	return f.shared(ctx, fmt.Sprintf("get|%s|%s", typ, key), obj, func(ctx context.Context) (runtime.Object, error) {
		o := reflect.New(typ.Elem()).Interface().(client.Object)
		return o, f.Reader.Get(ctx, key, o)
	})
}

// ListPage lists into list the first page of at most limit objects of its kind in namespace,
// from a read started after this call. list's kind is kept (a metadata-only list names it).
func (f *freshReader) ListPage(ctx context.Context, list client.ObjectList, namespace string, limit int64) error {
	empty := list.DeepCopyObject().(client.ObjectList)
	id := fmt.Sprintf("list|%s|%s|%s|%d", reflect.TypeOf(list), list.GetObjectKind().GroupVersionKind(), namespace, limit)
	return f.shared(ctx, id, list, func(ctx context.Context) (runtime.Object, error) {
		l := empty.DeepCopyObject().(client.ObjectList)
		return l, f.Reader.List(ctx, l, client.InNamespace(namespace), client.Limit(limit))
	})
}

// shared answers into out from a run of read that starts after this call, joining a run that
// other callers of the same id wait for.
func (f *freshReader) shared(ctx context.Context, id string, out runtime.Object, read func(context.Context) (runtime.Object, error)) error {
	f.mu.Lock()
	k := f.keys[id]
	if k == nil {
		k = &freshKey{}
		f.keys[id] = k
	}
	if k.next == nil {
		k.next = &freshRound{done: make(chan struct{})}
	}
	round := k.next
	if !k.running {
		k.running, k.next = true, nil
		go f.run(id, k, read, round)
	}
	f.mu.Unlock()

	select {
	case <-round.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if round.err != nil {
		return round.err
	}
	// Each caller gets its own copy: the shared object is never handed out.
	reflect.ValueOf(out).Elem().Set(reflect.ValueOf(round.obj.DeepCopyObject()).Elem())
	return nil
}

// run reads for round, then for every round callers joined meanwhile, until none waits.
func (f *freshReader) run(id string, k *freshKey, read func(context.Context) (runtime.Object, error), round *freshRound) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
		round.obj, round.err = read(ctx)
		cancel()
		close(round.done)

		f.mu.Lock()
		if k.next == nil {
			k.running = false
			delete(f.keys, id)
			f.mu.Unlock()
			return
		}
		round, k.next = k.next, nil
		f.mu.Unlock()
	}
}
