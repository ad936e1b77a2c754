/* The database schema as an ordered list of migrations: migration i takes
 * PRAGMA user_version from i to i+1. Never edit a released migration; add a
 * new one. Designed for the whole life of a series: instances, series,
 * jobs (with the derived UIDs fixed once per job), derived instances and
 * sends (one row per destination, with retry bookkeeping). */
#ifndef LDCT_DB_SCHEMA_H
#define LDCT_DB_SCHEMA_H

static const char *const DB_MIGRATIONS[] = {
    /* 0 -> 1: initial schema. Times are Unix milliseconds. */
    "CREATE TABLE series ("
    "  id INTEGER PRIMARY KEY,"
    "  study_uid TEXT NOT NULL,"
    "  series_uid TEXT NOT NULL UNIQUE,"
    "  modality TEXT NOT NULL DEFAULT '',"
    "  description TEXT NOT NULL DEFAULT '',"
    "  calling_ae TEXT NOT NULL DEFAULT '',"
    "  called_ae TEXT NOT NULL DEFAULT '',"
    "  state TEXT NOT NULL DEFAULT 'receiving' CHECK (state IN"
    "    ('receiving','stable','queued','done','failed','unmatched','discarded','removed')),"
    "  instance_count INTEGER NOT NULL DEFAULT 0,"
    "  first_received_ms INTEGER NOT NULL,"
    "  last_received_ms INTEGER NOT NULL,"
    "  stable_seconds INTEGER NOT NULL,"
    "  stable_ms INTEGER);"
    "CREATE INDEX series_state ON series(state, last_received_ms);"
    "CREATE TABLE instances ("
    "  id INTEGER PRIMARY KEY,"
    "  series_id INTEGER NOT NULL REFERENCES series(id),"
    "  sop_instance_uid TEXT NOT NULL UNIQUE,"
    "  sop_class_uid TEXT NOT NULL,"
    "  transfer_syntax_uid TEXT NOT NULL,"
    "  path TEXT NOT NULL,"
    "  size INTEGER NOT NULL,"
    "  received_ms INTEGER NOT NULL,"
    "  calling_ae TEXT NOT NULL DEFAULT '');"
    "CREATE INDEX instances_series ON instances(series_id);"
    "CREATE TABLE jobs ("
    "  id INTEGER PRIMARY KEY,"
    "  series_id INTEGER NOT NULL REFERENCES series(id),"
    "  rule TEXT NOT NULL,"
    "  action TEXT NOT NULL,"
    "  algorithm TEXT NOT NULL,"
    "  params TEXT NOT NULL DEFAULT '',"
    "  priority INTEGER NOT NULL DEFAULT 0,"
    "  state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN"
    "    ('pending','running','done','failed')),"
    "  attempts INTEGER NOT NULL DEFAULT 0,"
    "  worker TEXT NOT NULL DEFAULT '',"
    "  derived_series_uid TEXT,"
    "  last_error TEXT NOT NULL DEFAULT '',"
    "  created_ms INTEGER NOT NULL,"
    "  started_ms INTEGER,"
    "  finished_ms INTEGER);"
    "CREATE INDEX jobs_claim ON jobs(state, priority DESC, created_ms);"
    "CREATE TABLE derived_instances ("
    "  job_id INTEGER NOT NULL REFERENCES jobs(id),"
    "  source_sop_uid TEXT NOT NULL,"
    "  derived_sop_uid TEXT NOT NULL UNIQUE,"
    "  path TEXT NOT NULL DEFAULT '',"
    "  PRIMARY KEY (job_id, source_sop_uid));"
    "CREATE TABLE sends ("
    "  id INTEGER PRIMARY KEY,"
    "  job_id INTEGER REFERENCES jobs(id),"
    "  series_id INTEGER NOT NULL REFERENCES series(id),"
    "  what TEXT NOT NULL CHECK (what IN ('derived','original')),"
    "  destination TEXT NOT NULL,"
    "  state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN"
    "    ('pending','sending','done','dead')),"
    "  attempts INTEGER NOT NULL DEFAULT 0,"
    "  next_attempt_ms INTEGER NOT NULL DEFAULT 0,"
    "  last_error TEXT NOT NULL DEFAULT '',"
    "  created_ms INTEGER NOT NULL,"
    "  finished_ms INTEGER);"
    "CREATE INDEX sends_due ON sends(state, next_attempt_ms);",
    /* 1 -> 2: what a job needs at run time, fixed when it is created, so a
     * configuration reload never changes a queued job halfway. */
    "ALTER TABLE jobs ADD COLUMN destinations TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE jobs ADD COLUMN description_suffix TEXT NOT NULL DEFAULT '';"
    "CREATE INDEX jobs_series ON jobs(series_id);"
    "CREATE INDEX sends_job ON sends(job_id);",
    /* 2 -> 3: a series processed again (more instances arrived after its
     * job) keeps the derived SOP Instance UIDs of its earlier job, so two
     * jobs may share one: the UNIQUE constraint goes. */
    "CREATE TABLE derived_instances_v3 ("
    "  job_id INTEGER NOT NULL REFERENCES jobs(id),"
    "  source_sop_uid TEXT NOT NULL,"
    "  derived_sop_uid TEXT NOT NULL,"
    "  path TEXT NOT NULL DEFAULT '',"
    "  PRIMARY KEY (job_id, source_sop_uid));"
    "INSERT INTO derived_instances_v3 SELECT job_id, source_sop_uid, derived_sop_uid, path"
    "  FROM derived_instances;"
    "DROP TABLE derived_instances;"
    "ALTER TABLE derived_instances_v3 RENAME TO derived_instances;"
    "CREATE INDEX derived_source ON derived_instances(source_sop_uid);",
    /* 3 -> 4: a job waiting for disk space is not claimed again before
     * not_before_ms, so the jobs behind it run meanwhile. */
    "ALTER TABLE jobs ADD COLUMN not_before_ms INTEGER NOT NULL DEFAULT 0;",
    /* 4 -> 5: a series whose sending association ended by an abort or an
     * error waits longer for the sender's resend (db_series_interrupted). */
    "ALTER TABLE series ADD COLUMN interrupted_ms INTEGER NOT NULL DEFAULT 0;"
    /* and sends are found by series (series removal and purge, listings):
     * without this index every deleted series row scanned all sends for
     * its foreign key. */
    "CREATE INDEX sends_series ON sends(series_id);",
    /* 5 -> 6: when a job's not_before_ms or a send's next_attempt_ms was
     * set, so a clock step moves only the waits set on the old clock
     * (db_clock_stepped). */
    "ALTER TABLE jobs ADD COLUMN wait_set_ms INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE sends ADD COLUMN wait_set_ms INTEGER NOT NULL DEFAULT 0;",
    /* 6 -> 7: the series' instance count when a job was last claimed, what
     * `ldct jobs` shows for a job without derived instances (a failed one):
     * the series' count changes with late instances and resends. NULL for
     * jobs claimed before. */
    "ALTER TABLE jobs ADD COLUMN input_count INTEGER;",
    /* 7 -> 8: the settings of the ldctd that writes this database which
     * readers need to show it as the daemon sees it (`ldct series` marks a
     * series held with the daemon's interrupted_seconds, not the value of
     * whatever configuration it was given), written at each start and
     * reload (db_node_setting_put). */
    "CREATE TABLE node_settings ("
    "  name TEXT PRIMARY KEY,"
    "  value INTEGER NOT NULL,"
    "  set_ms INTEGER NOT NULL);",
    /* 8 -> 9: the progress of a running job, which its worker replaces at
     * most about once a second (db_job_progress_put) for `ldct jobs`. One
     * row per job. No foreign key: series removal and purge delete job
     * rows, which a reference from here would block; a row left behind is
     * ignored (older than its job's start) and cleared at the next start. */
    "CREATE TABLE job_progress ("
    "  job_id INTEGER PRIMARY KEY,"
    "  stage TEXT NOT NULL,"
    "  fraction REAL NOT NULL,"
    "  remaining_ms INTEGER NOT NULL,"
    "  updated_ms INTEGER NOT NULL);",
    /* 9 -> 10: the algorithm a job's last run resolved its own to (auto
     * becomes nlm2d, nlm3d or adaptive4d once the series is read), for
     * `ldct jobs`; '' before a run got that far. The job keeps 'auto', so a
     * run again resolves it again. */
    "ALTER TABLE jobs ADD COLUMN ran_algorithm TEXT NOT NULL DEFAULT '';",
};

#define DB_NMIGRATIONS ((int)(sizeof DB_MIGRATIONS / sizeof DB_MIGRATIONS[0]))

/* The oldest schema a read-only handle opens (`ldct` next to an older
 * ldctd that has not migrated yet): every statement prepared at open and
 * every query of the listings works on it. node_settings (8),
 * job_progress (9) and jobs.ran_algorithm (10) are read where present
 * (db_node_setting_get, db_jobs_list). Raise it when a reader needs a newer
 * table or column. */
#define DB_READ_MIN_VERSION 7

#endif
