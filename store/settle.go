package store

import (
	"errors"
	"slices"
	"time"
)

// This file is what both drivers do around the transaction that settles
// usage rows (SettleBatch) or a task (FinishTask): the checks before it and
// what the caller's values learn once it has committed, never before, so a
// retried or failed transaction leaves them as they were.

// CheckBatch refuses a batch with a nil row before anything is written.
func CheckBatch(logs []*UsageLog) error {
	if slices.Contains(logs, nil) {
		return errors.New("settle batch: nil usage log")
	}
	return nil
}

// SettledBatch gives each log of a committed batch its id (0: written
// before) and, when it had none, the batch's time ts.
func SettledBatch(logs []*UsageLog, ids []int64, ts time.Time) {
	for i, l := range logs {
		l.ID, l.CreatedAt = ids[i], orTime(l.CreatedAt, ts)
	}
}

// PrepareFinish checks FinishTask's arguments and fills in what the
// settling writes: the usage row's key, one per task however often it is
// settled, and the task's FinishedAt (ts when zero).
func PrepareFinish(t *Task, row *UsageLog, ts time.Time) error {
	if row == nil {
		return errors.New("finish task: nil usage row")
	}
	if row.Key == "" {
		row.Key = "task:" + t.ID // one usage row per task, however often it is settled
	}
	if t.FinishedAt.IsZero() {
		t.FinishedAt = ts
	}
	return nil
}

// TaskSettled is what a task's row as stored tells its usage row and the
// caller's task: who pays, and the windows and plan counted at the submit.
// The row charges the task's cost (to the plan's windows alone when a
// plan pays).
func TaskSettled(t *Task, row *UsageLog, userID, tokenID int64, windows, plan string) {
	row.UserID, row.TokenID, row.Cost, row.Windows, row.Plan = userID, tokenID, t.Cost, windows, plan
	t.Windows, t.Plan = windows, plan
}

// FinishedTask gives a committed settling's values to the caller's task
// and usage row: the row's id and time, the task's update time, its lease
// ended.
func FinishedTask(t *Task, row *UsageLog, id int64, ts time.Time) {
	row.ID, row.CreatedAt = id, orTime(row.CreatedAt, ts)
	t.UpdatedAt, t.LeaseOwner, t.LeaseUntil = ts, "", time.Time{}
}

// orTime is t, or def when t is zero.
func orTime(t, def time.Time) time.Time {
	if t.IsZero() {
		return def
	}
	return t
}
