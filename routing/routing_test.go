package routing

import (
	"fmt"
	"testing"
	"time"
)

func TestPlanPriorityAndWeight(t *testing.T) {
	hi := &Channel{Name: "hi", Models: []string{"m"}, Priority: 10}
	a := &Channel{Name: "a", Models: []string{"m"}, Weight: 3}
	b := &Channel{Name: "b", Models: []string{"m"}, Weight: 1}
	s := NewSet([]*Channel{a, b, hi})
	firstA := 0
	const n = 4000
	for i := 0; i < n; i++ {
		p := s.Plan("m", 5)
		if len(p) != 3 || p[0] != hi {
			t.Fatalf("plan %v: the higher priority channel must come first", names(p))
		}
		if p[1] == a {
			firstA++
		}
	}
	// weight 3:1 -> a first in about 75% of plans
	if firstA < n*65/100 || firstA > n*85/100 {
		t.Fatalf("a was first after hi in %d of %d plans, want about 75%%", firstA, n)
	}
	if got := s.Plan("m", 2); len(got) != 2 {
		t.Fatalf("max not applied: %v", names(got))
	}
	if got := s.Plan("other", 3); len(got) != 0 {
		t.Fatalf("unknown model planned: %v", names(got))
	}
}

func TestModelMapAndKeys(t *testing.T) {
	c := &Channel{Name: "c", Models: []string{"x"}, ModelMap: map[string]string{"alias": "real"}, Keys: []string{"k1", "k2"}}
	s := NewSet([]*Channel{c})
	if !s.Has("alias") || !s.Has("x") || s.Has("real") {
		t.Fatalf("models = %v", s.Models())
	}
	if c.UpstreamModel("alias") != "real" || c.UpstreamModel("x") != "x" {
		t.Fatal("model map not applied")
	}
	if c.Key() != "k1" || c.Key() != "k2" || c.Key() != "k1" {
		t.Fatal("keys do not rotate")
	}
}

func names(cs []*Channel) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// TestSetReplaceWhileRequestsPlan: plans made while the table is replaced
// come whole from one table or the other, and a channel kept across a
// replacement keeps its health record (run with -race).
func TestSetReplaceWhileRequestsPlan(t *testing.T) {
	kept := &Channel{Name: "kept", Models: []string{"m"}, Priority: 1}
	genA := []*Channel{kept, {Name: "a", Models: []string{"m"}}}
	genB := []*Channel{kept, {Name: "b", Models: []string{"m"}}}
	s := NewSet(genA)
	done := make(chan struct{})
	errs := make(chan string, 1)
	go func() {
		defer close(done)
		for range 2000 {
			p := s.Plan("m", 5)
			if len(p) != 2 || p[0] != kept || (p[1].Name != "a" && p[1].Name != "b") {
				select {
				case errs <- fmt.Sprintf("a plan of %d channels: %v", len(p), p):
				default:
				}
				return
			}
		}
	}()
	for i := range 500 {
		if i%2 == 0 {
			s.Replace(genB)
		} else {
			s.Replace(genA)
		}
	}
	<-done
	select {
	case e := <-errs:
		t.Fatal(e)
	default:
	}
	kept.Failed(DefaultHealthPolicy, time.Now(), 0)
	s.Replace(genB)
	if got := s.Channel("kept").Failing(); got != 1 {
		t.Fatalf("the kept channel's failures after a replacement: %d, want 1", got)
	}
	if s.Channel("a") != nil || s.Channel("b") == nil || !s.Has("m") {
		t.Fatal("the replacement's channels are not the set's")
	}
}
