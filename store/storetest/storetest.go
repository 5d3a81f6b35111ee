// Package storetest is the store.Store contract as a test suite, in the
// shape of testing/fstest.TestFS: an implementation's tests call Run with a
// function that opens a fresh, empty store, and RunInstances with one that
// opens several stores on one database (gateway instances sharing it), and
// get the whole contract checked. Every implementation (store/sqlite,
// store/postgres) runs the same suite, so they cannot drift apart.
//
// It imports no SQL driver: it sees the store through the interface alone.
package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// Opener opens a fresh, empty store for one test; the store is closed when
// the test ends.
type Opener func(t *testing.T) store.Store

// InstancesOpener opens n stores on one fresh, empty database, each with
// its own connections, as n gateway instances (or a gateway and a CLI
// command) would; they are closed when the test ends.
type InstancesOpener func(t *testing.T, n int) []store.Store

type test struct {
	name string
	run  func(*testing.T, Opener)
}

// Run checks the contract of one store at a time, in subtests by area.
func Run(t *testing.T, open Opener) {
	areas := []struct {
		name  string
		tests []test
	}{
		{"Users", []test{
			{"CreateUserDefaultsAndLookups", testCreateUserDefaultsAndLookups},
			{"CreateUserKeepsGivenFields", testCreateUserKeepsGivenFields},
			{"CreateUserConflicts", testCreateUserConflicts},
			{"UserNotFound", testUserNotFound},
			{"UpdatePassword", testUpdatePassword},
			{"AddQuota", testAddQuota},
			{"TransferInvitationQuota", testTransferInvitationQuota},
		}},
		{"Accounts", []test{
			{"RegisterUserRewardsInviterOnFirstPayment", testRegisterUserRewardsInviterOnFirstPayment},
			{"InvitationRewardNeedsAPayment", testInvitationRewardNeedsAPayment},
			{"ListUsersPagesAndAdminChanges", testListUsersPagesAndAdminChanges},
			{"UpdateAndDeleteTokenOnlyByOwner", testUpdateAndDeleteTokenOnlyByOwner},
			{"RedeemRefusesDisabledAndExpiredCodes", testRedeemRefusesDisabledAndExpiredCodes},
			{"ListUsageKeysetPagesAndFilters", testListUsageKeysetPagesAndFilters},
			{"DailySpend", testDailySpend},
			{"TouchAndDeleteUserSessions", testTouchAndDeleteUserSessions},
		}},
		{"UserChange", []test{
			{"UpdateUserAppliesEveryFieldAtOnce", testUpdateUserAppliesEveryFieldAtOnce},
			{"UpdateUserIsAllOrNothing", testUpdateUserIsAllOrNothing},
		}},
		{"Tokens", []test{
			{"TokenRoundTrip", testTokenRoundTrip},
			{"CreateTokenFrom", testCreateTokenFrom},
			{"TokenErrors", testTokenErrors},
			{"SetTokenStatus", testSetTokenStatus},
			{"TokenQuotaLimitAndUse", testTokenQuotaLimitAndUse},
		}},
		{"Redeem", []test{
			{"RedeemOnce", testRedeemOnce},
			{"RedeemForMissingUserKeepsCode", testRedeemForMissingUserKeepsCode},
			{"CreateRedemptionCodesAllOrNothing", testCreateRedemptionCodesAllOrNothing},
			{"RedeemRace", testRedeemRace},
		}},
		{"Sessions", []test{
			{"Sessions", testSessions},
			{"CreateSessionRejects", testCreateSessionRejects},
		}},
		{"ClientSecrets", []test{
			{"ClientSecrets", testClientSecrets},
		}},
		{"Runtime", []test{
			{"RuntimeItemsCreateReplaceDelete", testRuntimeItems},
			{"RuntimeResealIsAllOrNothing", testRuntimeReseal},
		}},
		{"Payments", []test{
			{"PaymentCreditedOnce", testPaymentCreditedOnce},
			{"PaymentRefundsAndDisputes", testPaymentRefundsAndDisputes},
			{"PaymentRefusals", testPaymentRefusals},
		}},
		{"Files", []test{
			{"FilesAndBatches", testFiles},
		}},
		{"SignIn", []test{
			{"Challenges", testChallenges},
			{"ResetPassword", testResetPassword},
			{"TOTP", testTOTP},
			{"ResealTOTP", testResealTOTP},
			{"Passkeys", testPasskeys},
			{"SSOLinks", testSSOLinks},
		}},
		{"Usage", []test{
			{"SettleBatchCharges", testSettleBatchCharges},
			{"SettleBatchEdges", testSettleBatchEdges},
			{"ListUsageFilterAndLimit", testListUsageFilterAndLimit},
			{"ConcurrentWriters", testConcurrentWriters},
			{"SettleBatchKeyedRowsOnce", testSettleBatchKeyedRowsOnce},
			{"QuotaArithmeticNeverOverflows", testQuotaArithmeticNeverOverflows},
			{"LimitsRoundTrip", testLimitsRoundTrip},
			{"RetentionKeepsDailyTotals", testRetentionKeepsDailyTotals},
			{"UsageAcrossDays", testUsageAcrossDays},
			{"UsageDaysKeyedOnce", testUsageDaysKeyedOnce},
			{"UsageFarDays", testUsageFarDays},
			{"DailyTotalsMatchRows", testDailyTotalsMatchRows},
		}},
		{"Leases", []test{
			{"LeaseBalances", testLeaseBalances},
			{"LeaseExpiry", testLeaseExpiry},
			{"ShareRates", testShareRates},
		}},
		{"Budgets", []test{
			{"BudgetsRoundTrip", testBudgetsRoundTrip},
			{"UserBudget", testUserBudget},
			{"SettleBatchWindowSpend", testSettleBatchWindowSpend},
			{"TaskWindowsAndPlan", testTaskWindowsAndPlan},
			{"RedeemPlanCode", testRedeemPlanCode},
			{"ClaimWindow", testClaimWindow},
		}},
		{"Audit", []test{
			{"AuditLog", testAuditLog},
			{"ListUsageOperatorFilters", testListUsageOperatorFilters},
			{"ListUsersSearch", testListUsersSearch},
			{"RedemptionCodeBatches", testRedemptionCodeBatches},
		}},
		{"Tasks", []test{
			{"TaskLifecycle", testTaskLifecycle},
			{"LeaseTasksNeverTwice", testLeaseTasksNeverTwice},
			{"FinishTaskExactlyOnceConcurrently", testFinishTaskExactlyOnceConcurrently},
			{"PendingTasks", testPendingTasks},
		}},
		{"Traces", []test{
			{"TraceIDs", testTraceIDs},
		}},
		{"Alerts", []test{
			{"ClaimOnce", testAlertClaimOnce},
			{"Outbox", testAlertOutbox},
			{"KeyThresholds", testKeyAlertThresholds},
			{"DeleteOld", testDeleteOldAlerts},
		}},
		{"Cache", []test{
			{"CacheHits", testCacheHits},
			{"CachedResponses", testCachedResponses},
		}},
		{"Prices", []test{
			{"UsagePriceTier", testUsagePriceTier},
		}},
		{"UserPage", []test{
			{"ListUserSessions", testListUserSessions},
			{"ListInvitees", testListInvitees},
			{"ListUsersByPlanAndGroup", testListUsersByPlanAndGroup},
			{"ListCodesUsedBy", testListCodesUsedBy},
		}},
	}
	for _, a := range areas {
		t.Run(a.name, func(t *testing.T) {
			for _, tt := range a.tests {
				t.Run(tt.name, func(t *testing.T) { tt.run(t, open) })
			}
		})
	}
}

// RunInstances checks what must hold when several stores share one
// database at once: money moved exactly once and never below what a
// conditional write allows, tasks leased and settled once.
func RunInstances(t *testing.T, open InstancesOpener) {
	for _, tt := range []struct {
		name string
		run  func(*testing.T, InstancesOpener)
	}{
		{"RedeemOnce", testInstancesRedeemOnce},
		{"InvitationRewardOnce", testInstancesInvitationRewardOnce},
		{"TransferInvitationQuota", testInstancesTransferInvitationQuota},
		{"UpdateUserDebits", testInstancesUpdateUserDebits},
		{"SettleBatchKeyedRowsOnce", testInstancesSettleBatchKeyedRowsOnce},
		{"LeaseTasks", testInstancesLeaseTasks},
		{"FinishTaskOnce", testInstancesFinishTaskOnce},
		{"MixedMoneyWrites", testInstancesMixedMoneyWrites},
		{"LeaseRace", testInstancesLeaseRace},
		{"ClaimAlertOnce", testInstancesClaimAlertOnce},
		{"PaymentEventOnce", testInstancesPaymentEventOnce},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, open) })
	}
}

func mustUser(t testing.TB, s store.Store, name string, quota int64) *store.User {
	t.Helper()
	u := &store.User{Username: name, PasswordHash: "hash-" + name, Quota: quota}
	if err := s.CreateUser(context.Background(), u); err != nil {
		t.Fatalf("create user %s: %v", name, err)
	}
	return u
}

func mustToken(t testing.TB, s store.Store, userID int64, hash string) *store.Token {
	t.Helper()
	tok := &store.Token{UserID: userID, Name: hash, KeyHash: hash, KeyPrefix: "sk-" + hash[:2]}
	if err := s.CreateToken(context.Background(), tok); err != nil {
		t.Fatalf("create token %s: %v", hash, err)
	}
	return tok
}

func mustGetUser(t testing.TB, s store.Store, id int64) *store.User {
	t.Helper()
	u, err := s.UserByID(context.Background(), id)
	if err != nil {
		t.Fatalf("user %d: %v", id, err)
	}
	return u
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }

// ms drops what the database does not keep, for comparing times.
func ms(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// errAny in a table means "some error, which one does not matter".
var errAny = errors.New("any error")
