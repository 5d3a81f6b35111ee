-- A request's OpenTelemetry trace id (hex) on its usage row, so a row in
-- the console links to its trace; '' when the site has no tracing. A task
-- keeps its submit's trace and span id: each poll's span links to them.
ALTER TABLE usage_logs ADD COLUMN trace_id TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN trace_id TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN span_id TEXT NOT NULL DEFAULT '';
