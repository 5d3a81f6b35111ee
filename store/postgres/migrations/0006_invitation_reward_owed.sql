-- An invitation's reward is owed from the invitee's signup and paid to the
-- inviter's invitation quota when the invitee first pays, in that payment's
-- transaction. Zero once paid, or when nothing is owed.
ALTER TABLE users ADD COLUMN invitation_reward_owed BIGINT NOT NULL DEFAULT 0;
