-- Per-tenant limits and fair claims (issue 27 item 4): the claim counts a tenant's running jobs
-- and finds when it last had a job started, for every queued job it considers.
CREATE INDEX jobs_tenant_status ON jobs (tenant, status);
CREATE INDEX jobs_tenant_started ON jobs (tenant, started_at);
