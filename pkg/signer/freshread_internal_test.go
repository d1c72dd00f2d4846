package signer

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// slowReader stands for the API server: each Get takes delay and returns a ConfigMap whose
// data says how many writes had been made when the read started.
type slowReader struct {
	client.Reader
	delay  time.Duration
	writes *atomic.Int64
	reads  atomic.Int64
}

func (s *slowReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	s.reads.Add(1)
	seen := s.writes.Load()
	time.Sleep(s.delay)
	cm := obj.(*corev1.ConfigMap)
	cm.Namespace, cm.Name = key.Namespace, key.Name
	cm.Data = map[string]string{"writesSeen": strconv.FormatInt(seen, 10)}
	return nil
}

// List answers with one ConfigMap whose data says how many writes had been made when the list
// started.
func (s *slowReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	s.reads.Add(1)
	seen := s.writes.Load()
	time.Sleep(s.delay)
	l := list.(*corev1.ConfigMapList)
	l.Items = []corev1.ConfigMap{{Data: map[string]string{"writesSeen": strconv.FormatInt(seen, 10)}}}
	return nil
}

// Every caller gets a read that started after its own write, however the calls interleave,
// and concurrent callers share reads: 64 callers make a handful of reads, not 64. Get and
// ListPage share reads the same way.
func TestFreshReaderSharesOnlyReadsStartedAfterTheCall(t *testing.T) {
	key := client.ObjectKey{Namespace: "argocd", Name: "fleet"}
	for name, read := range map[string]func(*freshReader) (map[string]string, error){
		"Get": func(fresh *freshReader) (map[string]string, error) {
			cm := &corev1.ConfigMap{}
			err := fresh.Get(context.Background(), key, cm)
			return cm.Data, err
		},
		"ListPage": func(fresh *freshReader) (map[string]string, error) {
			list := &corev1.ConfigMapList{}
			if err := fresh.ListPage(context.Background(), list, key.Namespace, 32); err != nil {
				return nil, err
			}
			return list.Items[0].Data, nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			var writes atomic.Int64
			api := &slowReader{delay: 20 * time.Millisecond, writes: &writes}
			fresh := newFreshReader(api)
			const callers = 64
			var wg sync.WaitGroup
			errs := make(chan string, callers)
			for i := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// Spread the calls over several reads' time, so some arrive mid-read.
					time.Sleep(time.Duration(i%8) * 7 * time.Millisecond)
					mine := writes.Add(1)
					data, err := read(fresh)
					if err != nil {
						errs <- err.Error()
						return
					}
					if seen, _ := strconv.ParseInt(data["writesSeen"], 10, 64); seen < mine {
						errs <- "a caller got a read that started before its write: saw " + data["writesSeen"] + " writes, made write " + strconv.FormatInt(mine, 10)
					}
					// Copies are the caller's own.
					data["writesSeen"] = "changed by a caller"
				}()
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
			if n := api.reads.Load(); n >= callers/4 {
				t.Errorf("%d callers made %d reads; concurrent callers should share them", callers, n)
			} else {
				t.Logf("%d callers, %d reads", callers, n)
			}
			// The last read's goroutine forgets its key right after it answers.
			deadline := time.Now().Add(5 * time.Second)
			for {
				fresh.mu.Lock()
				left := len(fresh.keys)
				fresh.mu.Unlock()
				if left == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d keys left behind after every read ended", left)
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
}

// A caller whose context ends stops waiting; the shared read goes on for the others.
func TestFreshReaderCallerCancels(t *testing.T) {
	var writes atomic.Int64
	api := &slowReader{delay: 100 * time.Millisecond, writes: &writes}
	fresh := newFreshReader(api)
	key := client.ObjectKey{Namespace: "argocd", Name: "fleet"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := fresh.Get(ctx, key, &corev1.ConfigMap{}); err == nil {
		t.Fatal("a cancelled caller got no error")
	}
	cm := &corev1.ConfigMap{}
	if err := fresh.Get(context.Background(), key, cm); err != nil || cm.Name != "fleet" {
		t.Fatalf("the next caller: %v %+v", err, cm)
	}
}
