package outboxkafka_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// The tests run franz-go's kfake, a Kafka cluster in the test process that speaks the real
// protocol to a real kgo client, and, for the relay tests, a real database on the server that
// OUTBOX_TEST_DSN names (scripts/test sets it, once per supported server).

// cluster is a kfake cluster with topics already made (partitions each).
func cluster(t testing.TB, partitions int32, topics ...string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// producer is a relay's client: franz-go's defaults (the idempotent producer), no linger, and
// metadata refreshed after 50ms instead of 5s, so the client's own retries after a "not leader"
// (which wait for fresh metadata) take milliseconds.
func producer(t testing.TB, c *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerLinger(0), kgo.MetadataMinAge(50 * time.Millisecond)}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatalf("kgo: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// consumeAll reads topics from the start until want records have come and then 300ms more
// pass without another (so a duplicate would be seen), or fails after 30s.
func consumeAll(t testing.TB, c *kfake.Cluster, want int, topics ...string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	deadline := time.Now().Add(30 * time.Second)
	var quietSince time.Time
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachError(func(topic string, p int32, err error) {
			if err != context.DeadlineExceeded {
				t.Errorf("fetch %s/%d: %v", topic, p, err)
			}
		})
		n := len(out)
		out = append(out, fs.Records()...)
		switch {
		case len(out) > n:
			quietSince = time.Time{}
		case len(out) >= want && quietSince.IsZero():
			quietSince = time.Now()
		case len(out) >= want && time.Since(quietSince) > 300*time.Millisecond:
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumed %d records in 30s, want %d", len(out), want)
		}
	}
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// failProduce makes the cluster answer the next n produce requests with code on every
// partition, and counts them.
func failProduce(c *kfake.Cluster, n int64, code *kerr.Error) *atomic.Int64 {
	var failed atomic.Int64
	c.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		if failed.Load() >= n {
			return nil, nil, false // the cluster handles it; this control is dropped
		}
		c.KeepControl()
		failed.Add(1)
		req := kreq.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = code.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	return &failed
}

func messageID(t testing.TB, r *kgo.Record) outbox.MessageID {
	t.Helper()
	id, err := strconv.ParseInt(header(r, "outbox-message-id"), 10, 64)
	if err != nil {
		t.Fatalf("record %s/%d@%d: outbox-message-id %q", r.Topic, r.Partition, r.Offset, header(r, "outbox-message-id"))
	}
	return outbox.MessageID(id)
}
