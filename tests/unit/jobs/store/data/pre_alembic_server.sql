-- A store written by tandem at commit fc1ac24, before Alembic (schema_version 1), dumped
-- with sqlite3's iterdump: the baseline the migrations upgrade from. Do not edit.
BEGIN TRANSACTION;
CREATE TABLE tandem_audit (
	id INTEGER NOT NULL, 
	time FLOAT NOT NULL, 
	user VARCHAR(64) NOT NULL, 
	action VARCHAR(64) NOT NULL, 
	target TEXT, 
	outcome VARCHAR(16) NOT NULL, 
	status INTEGER NOT NULL, 
	detail TEXT, 
	PRIMARY KEY (id)
);
INSERT INTO "tandem_audit" VALUES(1,1.79567686252449631688e+09,'alice','submit','job_old','ok',200,NULL);
CREATE TABLE tandem_job_tags (
	job_id VARCHAR(128) NOT NULL, 
	tag VARCHAR(256) NOT NULL, 
	PRIMARY KEY (job_id, tag), 
	FOREIGN KEY(job_id) REFERENCES tandem_jobs (job_id) ON DELETE CASCADE
);
INSERT INTO "tandem_job_tags" VALUES('job_old','a');
INSERT INTO "tandem_job_tags" VALUES('job_old','b');
CREATE TABLE tandem_jobs (
	job_id VARCHAR(128) NOT NULL, 
	name VARCHAR(512) NOT NULL, 
	state VARCHAR(32) NOT NULL, 
	priority INTEGER NOT NULL, 
	tags TEXT NOT NULL, 
	submitted_at FLOAT NOT NULL, 
	started_at FLOAT, 
	ended_at FLOAT, 
	spec BLOB, 
	spec_json TEXT NOT NULL, 
	error TEXT, 
	traceback TEXT, 
	result TEXT, 
	PRIMARY KEY (job_id)
);
INSERT INTO "tandem_jobs" VALUES('job_old','old run','RUNNING',3,'["a","b"]',1700000000.0,1700000001.0,NULL,X'8073706563','{"num_workers":2}',NULL,NULL,NULL);
CREATE TABLE tandem_meta (
	"key" VARCHAR(64) NOT NULL, 
	value TEXT NOT NULL, 
	PRIMARY KEY ("key")
);
INSERT INTO "tandem_meta" VALUES('schema_version','1');
CREATE TABLE tandem_model_aliases (
	name VARCHAR(128) NOT NULL, 
	alias VARCHAR(64) NOT NULL, 
	version INTEGER NOT NULL, 
	updated FLOAT NOT NULL, 
	PRIMARY KEY (name, alias)
);
INSERT INTO "tandem_model_aliases" VALUES('digits','prod',1,1.79567686258657288546e+09);
CREATE TABLE tandem_model_versions (
	name VARCHAR(128) NOT NULL, 
	version INTEGER NOT NULL, 
	created FLOAT NOT NULL, 
	location TEXT NOT NULL, 
	meta TEXT NOT NULL, 
	PRIMARY KEY (name, version)
);
INSERT INTO "tandem_model_versions" VALUES('digits',1,1.79567686255625557894e+09,'/srv/tandem/models/digits/f1b77de52f2c4a07','{"config": {}, "metrics": {"acc": 0.9}, "lineage": {}, "environment": {}, "model_class": {}, "tags": {}}');
CREATE TABLE tandem_owners (
	kind VARCHAR(16) NOT NULL, 
	"key" VARCHAR(1024) NOT NULL, 
	owner VARCHAR(64) NOT NULL, 
	created_at FLOAT NOT NULL, 
	PRIMARY KEY (kind, "key")
);
INSERT INTO "tandem_owners" VALUES('job','job_old','alice',1.79567686251845383643e+09);
CREATE TABLE tandem_quotas (
	owner VARCHAR(64) NOT NULL, 
	quota TEXT NOT NULL, 
	updated_at FLOAT NOT NULL, 
	PRIMARY KEY (owner)
);
INSERT INTO "tandem_quotas" VALUES('alice','{"cpus": 2.0}',1.79567686252985310555e+09);
CREATE TABLE tandem_reports (
	job_id VARCHAR(128) NOT NULL, 
	seq BIGINT NOT NULL, 
	rank INTEGER, 
	time FLOAT NOT NULL, 
	metrics TEXT NOT NULL, 
	checkpoint_path TEXT, 
	PRIMARY KEY (job_id, seq), 
	FOREIGN KEY(job_id) REFERENCES tandem_jobs (job_id) ON DELETE CASCADE
);
INSERT INTO "tandem_reports" VALUES('job_old',0,0,1700000002.0,'{"loss":0.5}','/ck/0');
CREATE TABLE tandem_transitions (
	id INTEGER NOT NULL, 
	job_id VARCHAR(128) NOT NULL, 
	from_state VARCHAR(32), 
	to_state VARCHAR(32) NOT NULL, 
	time FLOAT NOT NULL, 
	reason TEXT, 
	PRIMARY KEY (id), 
	FOREIGN KEY(job_id) REFERENCES tandem_jobs (job_id) ON DELETE CASCADE
);
INSERT INTO "tandem_transitions" VALUES(1,'job_old',NULL,'QUEUED',1700000000.0,NULL);
INSERT INTO "tandem_transitions" VALUES(2,'job_old','QUEUED','RUNNING',1700000001.0,'started');
CREATE TABLE tandem_usage (
	id INTEGER NOT NULL, 
	job_id VARCHAR(128) NOT NULL, 
	rank INTEGER NOT NULL, 
	time FLOAT NOT NULL, 
	cpu_percent FLOAT NOT NULL, 
	rss_bytes BIGINT NOT NULL, 
	gpu_util FLOAT, 
	gpu_mem_bytes BIGINT, 
	PRIMARY KEY (id), 
	FOREIGN KEY(job_id) REFERENCES tandem_jobs (job_id) ON DELETE CASCADE
);
INSERT INTO "tandem_usage" VALUES(1,'job_old',0,1700000002.0,50.0,1000,NULL,NULL);
CREATE TABLE tandem_users (
	name VARCHAR(64) NOT NULL, 
	role VARCHAR(16) NOT NULL, 
	token_id VARCHAR(32) NOT NULL, 
	token_hash TEXT NOT NULL, 
	created_at FLOAT NOT NULL, 
	created_by VARCHAR(64), 
	revoked_at FLOAT, 
	PRIMARY KEY (name), 
	UNIQUE (token_id)
);
INSERT INTO "tandem_users" VALUES('alice','member','b2a39ab7564d789d','pbkdf2_sha256$120000$ca23f7a09b5eb21878daf55e13df24fa$6658ce36da0b42a23841fb3f73dc5228f82771da6d4ffcdda69b221470b443cf',1.79567686250915861125e+09,'admin',NULL);
CREATE INDEX ix_tandem_jobs_submitted ON tandem_jobs (submitted_at, job_id);
CREATE INDEX ix_tandem_jobs_name ON tandem_jobs (name, submitted_at);
CREATE INDEX ix_tandem_jobs_state ON tandem_jobs (state, submitted_at);
CREATE INDEX ix_tandem_job_tags_tag ON tandem_job_tags (tag, job_id);
CREATE INDEX ix_tandem_transitions_job ON tandem_transitions (job_id, id);
CREATE INDEX ix_tandem_usage_job_time ON tandem_usage (job_id, time, rank);
CREATE INDEX ix_tandem_audit_user ON tandem_audit (user, time);
CREATE INDEX ix_tandem_audit_time ON tandem_audit (time);
COMMIT;
