package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// familiesConfig serves the four callback-capable video families, each
// on its fake vendor, through the task endpoints, polled every 50ms and
// each status read given up after pollTimeout.
func familiesConfig(pollTimeout string) *caddyfile {
	return gatewayConfig().
		option("token_cache_ttl 1s").
		option(block("tasks",
			"max_age 1h",
			"poll_interval 50ms",
			"max_poll_interval 200ms",
			"poll_timeout "+pollTimeout)).
		channel("kling", block("kling", "token_ttl 10m"), "{{KLING}}", "{{KLING_KEY}}", "kling-v2-1").
		channel("vidu", "vidu", "{{VIDU}}", "{{VIDU_KEY}}", "viduq1").
		channel("seedance", "seedance", "{{SEEDANCE}}", "{{SEEDANCE_KEY}}", "seedance-1-0-pro",
			"model_map seedance-1-0-pro seedance-1-0-pro-250528").
		channel("minimax", "minimax", "{{MINIMAX}}", "{{MINIMAX_KEY}}", "MiniMax-Hailuo-02").
		price("kling-v2-1", "video_second 0.05", "max_seconds 10").
		price("viduq1", "video_second 0.08", "max_seconds 5").
		price("seedance-1-0-pro", "video_second 0.124", "max_seconds 12").
		price("MiniMax-Hailuo-02", "video_second 0.082", "max_seconds 6").
		withSite(tasksSite...)
}

// vendorFake is what the tests drive of each fake vendor.
type vendorFake interface {
	Jobs() []gatewaytest.Job
	Last(t testing.TB) gatewaytest.Job
	Run(id string)
	Finish(id string)
	Fail(id, reason string)
	SetFaults(f gatewaytest.JobFaults)
	Faulted() int
}

type familiesSetup struct {
	gw       *gatewaytest.Gateway
	kling    *gatewaytest.FakeKling
	vidu     *gatewaytest.FakeVidu
	seedance *gatewaytest.FakeSeedance
	minimax  *gatewaytest.FakeMiniMax
}

func startFamilies(t *testing.T) *familiesSetup {
	t.Helper()
	return startFamiliesWith(t, familiesConfig("2s"))
}

func startFamiliesWith(t *testing.T, cfg *caddyfile) *familiesSetup {
	t.Helper()
	s := &familiesSetup{
		kling:    gatewaytest.NewFakeKling(t, "ak-fam-kling-01", "sk-fam-kling-secret-01"),
		vidu:     gatewaytest.NewFakeVidu(t, "vda-fam-vidu-01"),
		seedance: gatewaytest.NewFakeSeedance(t, "ark-fam-seedance-01"),
		minimax:  gatewaytest.NewFakeMiniMax(t, "mmx-fam-minimax-01"),
	}
	gatewaytest.Secret("ak-fam-kling-01:sk-fam-kling-secret-01")
	dir := t.TempDir()
	vars := gatewaytest.Vars{
		"DB":    filepath.Join(dir, "gateway.db"),
		"KLING": s.kling.BaseURL(), "KLING_KEY": "ak-fam-kling-01:sk-fam-kling-secret-01",
		"VIDU": s.vidu.BaseURL(), "VIDU_KEY": "vda-fam-vidu-01",
		"SEEDANCE": s.seedance.BaseURL(), "SEEDANCE_KEY": "ark-fam-seedance-01",
		"MINIMAX": s.minimax.BaseURL(), "MINIMAX_KEY": "mmx-fam-minimax-01",
	}
	s.gw = gatewaytest.Start(t, cfg.String(), vars)
	s.gw.DBPath = vars["DB"]
	return s
}

// famCall sends one task request and decodes the task envelope (the
// helpers of tasks_test.go: taskAnswer, decodeTask, submitTask, waitTask).
func famCall(t *testing.T, gw *gatewaytest.Gateway, method, path, key, body string) (int, taskAnswer, string) {
	t.Helper()
	var raw []byte
	if body != "" {
		raw = []byte(body)
	}
	resp, b := gw.Do(method, path, key, raw, nil)
	return resp.StatusCode, decodeTask(t, resp.StatusCode, b), string(b)
}

// a callback URL with a query that must reach the vendor byte for byte
const famCallback = "https://hooks.example.com/video/done?token=a%2Fb&n=1"

// family is one vendor's row of the tests.
type family struct {
	model string
	fake  func(s *familiesSetup) vendorFake
	// option is a vendor option of its own, sent in metadata, as
	// "name": value JSON
	optionName, optionValue string
	// a finished task of duration seconds is charged unitsPerSecond each
	duration       int
	unitsPerSecond int64
	maxSeconds     int64
	// image is a first frame the family takes; imageOnly, the model makes
	// video from an image only (Form A sends it too)
	image     string
	imageOnly bool
	// owned is a metadata member the family's native body owns
	owned string
	// vendorRefusal is a request the adapter passes and the vendor
	// refuses, and what the vendor says
	vendorRefusal, vendorSays string
}

var videoFamilies = []family{
	{model: "kling-v2-1", fake: func(s *familiesSetup) vendorFake { return s.kling },
		optionName: "cfg_scale", optionValue: `0.7`, duration: 10, unitsPerSecond: 50_000, maxSeconds: 10,
		image: "https://img.example.com/first.png", imageOnly: true, owned: "mode",
		vendorRefusal: `{"model":"kling-v2-1","prompt":"x","image":"https://img.example.com/a.png","metadata":{"aspect_ratio":"16:9"}}`,
		vendorSays:    "aspect_ratio is not supported for image2video"},
	{model: "viduq1", fake: func(s *familiesSetup) vendorFake { return s.vidu },
		optionName: "movement_amplitude", optionValue: `"small"`, duration: 5, unitsPerSecond: 80_000, maxSeconds: 5,
		image: "https://img.example.com/first.png", owned: "resolution",
		vendorRefusal: `{"model":"viduq1","prompt":"x","aspect_ratio":"2:1"}`, vendorSays: `aspect_ratio "2:1" is invalid`},
	{model: "seedance-1-0-pro", fake: func(s *familiesSetup) vendorFake { return s.seedance },
		optionName: "camera_fixed", optionValue: `true`, duration: 6, unitsPerSecond: 124_000, maxSeconds: 12,
		image: "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==", owned: "content",
		vendorRefusal: `{"model":"seedance-1-0-pro","prompt":"x","aspect_ratio":"5:4"}`, vendorSays: "not a supported ratio"},
	{model: "MiniMax-Hailuo-02", fake: func(s *familiesSetup) vendorFake { return s.minimax },
		optionName: "prompt_optimizer", optionValue: `false`, duration: 10, unitsPerSecond: 82_000, maxSeconds: 6,
		image: "https://img.example.com/first.png", owned: "duration",
		vendorRefusal: `{"model":"MiniMax-Hailuo-02","prompt":"x","size":"1080P","duration":10}`, vendorSays: "1080P supports 6 seconds only"},
}

// submitted returns the member name of the vendor's submit body, as sent.
func submitted(t *testing.T, job gatewaytest.Job, name string) string {
	t.Helper()
	var body map[string]json.RawMessage
	if err := json.Unmarshal(job.Body, &body); err != nil {
		t.Fatalf("the vendor got %s: %v", job.Body, err)
	}
	return string(body[name])
}

// TestTaskFamilies drives each family through the real binary: Form A
// submitted, running, finished and charged its seconds; Form B with a
// first frame, failed and refunded; the callback URL and the vendor's own
// option reaching the vendor unchanged in both.
func TestTaskFamilies(t *testing.T) {
	s := startFamilies(t)
	for _, f := range videoFamilies {
		t.Run(f.model, func(t *testing.T) {
			user := "u-" + strings.ToLower(strings.ReplaceAll(f.model, ".", ""))
			const balance = 5_000_000
			key := s.gw.AddUser(user, balance)
			fake := f.fake(s)
			metadata := fmt.Sprintf(`{"callback_url":%q,%q:%s}`, famCallback, f.optionName, f.optionValue)

			// Form A: everything at the top level
			image := ""
			if f.imageOnly {
				image = fmt.Sprintf(`"image":%q,`, f.image)
			}
			sub := submitTask(t, s.gw, key, fmt.Sprintf(`{"model":%q,"prompt":"a fox runs through fresh snow",%s"duration":%d,"metadata":%s}`,
				f.model, image, f.duration, metadata))
			reserved := f.unitsPerSecond * int64(f.duration)
			if q, _ := s.gw.Quota(user); q != balance-reserved {
				t.Fatalf("quota after submit %d, want %d reserved", q, reserved)
			}
			job := fake.Last(t)
			if got := submitted(t, job, "callback_url"); got != `"`+famCallback+`"` {
				t.Errorf("the vendor's callback_url is %s, want %q unchanged", got, famCallback)
			}
			if got := submitted(t, job, f.optionName); got != f.optionValue {
				t.Errorf("metadata.%s reached the vendor as %s, want %s", f.optionName, got, f.optionValue)
			}
			if st := waitTask(t, s.gw, key, sub.Data.TaskID, "not_started"); st.Data.Model != f.model {
				t.Fatalf("queued: %+v", st.Data)
			}
			fake.Run(job.ID)
			waitTask(t, s.gw, key, sub.Data.TaskID, "running")
			fake.Finish(job.ID)
			done := waitTask(t, s.gw, key, sub.Data.TaskID, "finished")
			if *done.Data.Progress != 100 || len(done.Data.Files) != 1 || done.Data.Files[0].URL != job.VideoURL || done.Data.Files[0].Type != "video" {
				t.Fatalf("finished: %+v, want the vendor's video %s", done.Data, job.VideoURL)
			}
			if resp, err := http.Get(done.Data.Files[0].URL); err != nil || resp.StatusCode != 200 {
				t.Fatalf("the video's URL: %v %v", resp, err)
			} else {
				resp.Body.Close()
			}
			rows := s.gw.WaitUsage(user, 1)
			if rows[0].Cost != reserved || rows[0].Model != f.model || rows[0].Channel == "" || rows[0].Status != 200 {
				t.Fatalf("usage row %+v, want %d charged", rows[0], reserved)
			}
			if q, used := s.gw.Quota(user); q != balance-reserved || used != reserved {
				t.Fatalf("quota %d used %d after the finished task, want %d used", q, used, reserved)
			}

			// Form B: inside input, with a first frame; it fails and is refunded
			subB := submitTask(t, s.gw, key, fmt.Sprintf(`{"model":%q,"input":{"prompt":"it comes alive","image":%q,"metadata":%s}}`,
				f.model, f.image, metadata))
			worst := f.unitsPerSecond * f.maxSeconds
			if q, _ := s.gw.Quota(user); q != balance-reserved-worst {
				t.Fatalf("quota after a submit without duration %d, want the %d worst case held", q, worst)
			}
			jobB := fake.Last(t)
			if jobB.ID == job.ID || submitted(t, jobB, "callback_url") != `"`+famCallback+`"` || submitted(t, jobB, f.optionName) != f.optionValue {
				t.Fatalf("form B reached the vendor as %s", jobB.Body)
			}
			if !strings.Contains(string(jobB.Body), strings.TrimPrefix(strings.TrimPrefix(f.image, "data:image/png;base64,"), "https://")) {
				t.Fatalf("the first frame did not reach the vendor: %s", jobB.Body)
			}
			fake.Run(jobB.ID)
			fake.Fail(jobB.ID, "the video failed the vendor's content review")
			failed := waitTask(t, s.gw, key, subB.Data.TaskID, "failed")
			if failed.Data.ErrorMessage != "the video failed the vendor's content review" || len(failed.Data.Files) != 0 {
				t.Fatalf("failed: %+v", failed.Data)
			}
			rows = s.gw.WaitUsage(user, 2)
			if rows[1].Cost != 0 {
				t.Fatalf("a failed task cost %d", rows[1].Cost)
			}
			if q, used := s.gw.Quota(user); q != balance-reserved || used != reserved {
				t.Fatalf("quota %d used %d after the failed task, want its reservation back", q, used)
			}
		})
	}
}

// TestTaskFamiliesRefusals: a metadata member a family's body owns is
// refused by the gateway before the vendor sees it, a vendor's refusal
// reaches the client in the vendor's words, and neither costs anything.
func TestTaskFamiliesRefusals(t *testing.T) {
	s := startFamilies(t)
	key := s.gw.AddUser("ada", 5_000_000)
	n := 0
	for _, f := range videoFamilies {
		fake := f.fake(s)
		t.Run(f.model+" owned "+f.owned, func(t *testing.T) {
			n++
			before := len(fake.Jobs())
			code, a, raw := famCall(t, s.gw, http.MethodPost, "/api/generate/submit", key,
				fmt.Sprintf(`{"model":%q,"prompt":"x","metadata":{%q:"1"}}`, f.model, f.owned))
			if code != 400 || a.Error == nil || !strings.Contains(a.Error.Message, f.owned) {
				t.Fatalf("got %d %s, want a 400 naming %s", code, raw, f.owned)
			}
			if len(fake.Jobs()) != before {
				t.Fatal("the vendor received a refused task")
			}
		})
		t.Run(f.model+" vendor refusal", func(t *testing.T) {
			n++
			code, a, raw := famCall(t, s.gw, http.MethodPost, "/api/generate/submit", key, f.vendorRefusal)
			if code != 400 || a.Error == nil || !strings.Contains(a.Error.Message, f.vendorSays) {
				t.Fatalf("got %d %s, want the vendor's %q", code, raw, f.vendorSays)
			}
		})
	}
	// chat on a video family is refused, in OpenAI's shape
	resp, b := s.gw.Do(http.MethodPost, "/v1/chat/completions", key, []byte(`{"model":"kling-v2-1","messages":[{"role":"user","content":"hi"}]}`), nil)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "/api/generate/submit") {
		t.Fatalf("chat on kling: %d %s", resp.StatusCode, b)
	}
	s.gw.WaitUsage("ada", n+1)
	if q, used := s.gw.Quota("ada"); q != 5_000_000 || used != 0 {
		t.Fatalf("refused submits cost: quota %d used %d", q, used)
	}
}

// TestTaskKlingTokenRefused: a channel whose key pair Kling does not
// accept fails the submit (a channel fault: the next channel would be
// tried), without the secret in the answer or the logs, and costs nothing.
func TestTaskKlingTokenRefused(t *testing.T) {
	fake := gatewaytest.NewFakeKling(t, "ak-right-0001", "sk-right-secret-0001")
	gatewaytest.Secret("sk-wrong-secret-0001")
	dir := t.TempDir()
	gw := gatewaytest.Start(t, familiesConfig("2s").String(), gatewaytest.Vars{"DB": filepath.Join(dir, "gateway.db"),
		"KLING": fake.BaseURL(), "KLING_KEY": "ak-right-0001:sk-wrong-secret-0001",
		"VIDU": "http://127.0.0.1:1", "VIDU_KEY": "v", "SEEDANCE": "http://127.0.0.1:1", "SEEDANCE_KEY": "s",
		"MINIMAX": "http://127.0.0.1:1", "MINIMAX_KEY": "m"})
	gw.DBPath = filepath.Join(dir, "gateway.db")
	key := gw.AddUser("ada", 5_000_000)
	code, a, raw := famCall(t, gw, http.MethodPost, "/api/generate/submit", key, `{"model":"kling-v2-1","prompt":"x","image":"https://img.example.com/a.png"}`)
	if code <= 400 || a.Error == nil || strings.Contains(raw, "sk-wrong") {
		t.Fatalf("a refused token: %d %s", code, raw)
	}
	if len(fake.Jobs()) != 0 {
		t.Fatal("Kling accepted a task with a bad token")
	}
	// the gateway's log line arrives through a pipe, maybe after the answer
	eventually(t, "the log to show Kling's 401 as the channel's failure", func() bool {
		return strings.Contains(gw.Logs(), `"channel":"kling","status":401`)
	})
	gw.WaitUsage("ada", 1)
	if q, used := gw.Quota("ada"); q != 5_000_000 || used != 0 {
		t.Fatalf("a refused submit cost: quota %d used %d", q, used)
	}
}

// TestTaskFamiliesPollFaults: a vendor whose status reads fail (each in its
// own error shape; MiniMax's inside an HTTP 200) or hang leaves the task
// as it was, the poller gives each read up at poll_timeout and keeps
// polling, and once the vendor heals the task finishes and is charged
// once.
func TestTaskFamiliesPollFaults(t *testing.T) {
	s := startFamiliesWith(t, familiesConfig("300ms"))
	for _, f := range videoFamilies {
		t.Run(f.model, func(t *testing.T) {
			user := "p-" + strings.ToLower(strings.ReplaceAll(f.model, ".", ""))
			key := s.gw.AddUser(user, 5_000_000)
			fake := f.fake(s)
			body := fmt.Sprintf(`{"model":%q,"prompt":"waves at dusk","duration":%d}`, f.model, f.duration)
			if f.imageOnly {
				body = fmt.Sprintf(`{"model":%q,"prompt":"waves at dusk","image":%q,"duration":%d}`, f.model, f.image, f.duration)
			}
			sub := submitTask(t, s.gw, key, body)
			job := fake.Last(t)

			status := http.StatusInternalServerError
			if f.model == "MiniMax-Hailuo-02" {
				status = http.StatusOK // a base_resp error
			}
			fake.SetFaults(gatewaytest.JobFaults{PollStatus: status})
			fake.Run(job.ID)
			before := fake.Faulted()
			eventually(t, "polls to meet the failing vendor", func() bool { return fake.Faulted() >= before+2 })
			if st := waitTask(t, s.gw, key, sub.Data.TaskID, "not_started"); st.Data.ErrorMessage != "" {
				t.Fatalf("a failing read changed the task: %+v", st.Data)
			}

			fake.SetFaults(gatewaytest.JobFaults{HangPolls: true})
			before = fake.Faulted()
			eventually(t, "polls to hang", func() bool { return fake.Faulted() >= before+2 })
			fake.SetFaults(gatewaytest.JobFaults{})

			fake.Finish(job.ID)
			waitTask(t, s.gw, key, sub.Data.TaskID, "finished")
			want := f.unitsPerSecond * int64(f.duration)
			rows := s.gw.WaitUsage(user, 1)
			if len(rows) != 1 || rows[0].Cost != want {
				t.Fatalf("usage rows %+v, want one of %d", rows, want)
			}
			if _, used := s.gw.Quota(user); used != want {
				t.Fatalf("used %d, want %d", used, want)
			}
		})
	}
}
