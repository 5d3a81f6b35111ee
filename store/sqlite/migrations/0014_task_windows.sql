-- A task's spending windows and plan (issue 22): windows are the window
-- ids its reservation counts in, from the submit (the ids its usage row
-- carries when it settles); plan is the plan that pays it, '' when the
-- balance does (no balance is then reserved or charged).
ALTER TABLE tasks ADD COLUMN windows TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN plan TEXT NOT NULL DEFAULT '';
