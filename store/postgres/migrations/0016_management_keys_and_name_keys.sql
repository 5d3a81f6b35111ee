-- A management key reaches the account and admin API as its owner's
-- session does; any other key reaches the model and task endpoints only.
-- Set when the key is made (by a signed-in user), never changed after.
ALTER TABLE tokens ADD COLUMN management BOOLEAN NOT NULL DEFAULT FALSE;

-- name_key is a username as a person reads it (usernames.Key: NFKC,
-- case-folded, Cyrillic and Greek look-alikes as Latin), unique, so no one
-- registers "Root" or "rооt" beside "root". The gateway fills it in for
-- existing users when it opens the database; users whose names already
-- share a key keep NULL (and their names) and block nobody else.
ALTER TABLE users ADD COLUMN name_key TEXT;
CREATE UNIQUE INDEX users_name_key ON users (name_key);

-- What pays an invitation's reward: a payment of at least
-- invitation_reward_min units, or a plan code when invitation_reward_plans
-- is set. Rewards owed before this step keep the default rule: a payment
-- of at least the reward itself.
ALTER TABLE users ADD COLUMN invitation_reward_min BIGINT NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN invitation_reward_plans BOOLEAN NOT NULL DEFAULT FALSE;
UPDATE users SET invitation_reward_min = invitation_reward_owed WHERE invitation_reward_owed > 0;
