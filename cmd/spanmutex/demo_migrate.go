package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"cloud.google.com/go/spanner"
	dbadmin "cloud.google.com/go/spanner/admin/database/apiv1"
	adminpb "cloud.google.com/go/spanner/admin/database/apiv1/databasepb"

	"github.com/spanmutex/spanmutex/ddl"
	"github.com/spanmutex/spanmutex/internal/cmdline"
)

// release is one release of the demo service: its migration files (a
// directory of demomigrations) and what the database must look like after.
type release struct {
	dir      string
	version  int              // golang-migrate's version after it
	applies  []int            // the versions it adds
	backfill map[string]int64 // runs of each backfill counted in table Backfills
}

// demoReleases are the two releases the demo deploys.
var demoReleases = []release{
	{"release1", 4, []int{1, 2, 3, 4}, map[string]int64{"status": 1, "priority": 0}},
	{"release2", 6, []int{5, 6}, map[string]int64{"status": 1, "priority": 1}},
}

// migrationScenarios deploys each release to d.opts.instances replicas,
// separate OS processes started at once, each running golang-migrate under
// the spanmutex lock (package migrations) on a database of their own, and
// checks that each release was applied exactly once.
func (d *demo) migrationScenarios(ctx context.Context) (bool, error) {
	db, drop, err := d.scratchDatabase(ctx)
	if err != nil {
		return false, err
	}
	defer drop()
	client, err := d.newClient(ctx, db)
	if err != nil {
		return false, err
	}
	defer client.Close()
	ok := true
	for i, rel := range demoReleases {
		d.out.Printf("\n== Scenario %d: %d replicas, each its own OS process and Spanner client, start at once and run the migrations of %s ==\n",
			i+1, d.opts.instances, rel.dir)
		d.out.Printf("   golang-migrate with its spanner driver, under the spanmutex lock %q (package migrations); database %s\n\n",
			"schema-migrations", db)
		reports, err := d.deploy(ctx, db, rel)
		if err != nil {
			return false, err
		}
		relOK, err := d.checkRelease(ctx, client, rel, reports)
		if err != nil {
			return false, err
		}
		ok = relOK && ok
	}
	return ok, nil
}

// replicaProc is one replica process of the demo, with its pipes.
type replicaProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *strings.Builder
}

// deploy starts the replicas of rel, lets them go at once, and returns
// their reports.
func (d *demo) deploy(ctx context.Context, db string, rel release) ([]replicaReport, error) {
	procs := make([]*replicaProc, d.opts.instances)
	defer func() {
		for _, p := range procs {
			if p != nil && p.cmd.ProcessState == nil {
				_ = p.cmd.Process.Kill()
				_ = p.cmd.Wait()
			}
		}
	}()
	if err := d.startReplicas(ctx, db, rel, procs); err != nil {
		return nil, err
	}
	for i, p := range procs {
		line, err := p.stdout.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "ready" {
			return nil, fmt.Errorf("replica %d did not get ready (%q, %v); its stderr:\n%s", i+1, line, err, p.stderr.String())
		}
	}
	d.out.Printf("  %d replicas connected (pids", len(procs))
	for _, p := range procs {
		d.out.Printf(" %d", p.cmd.Process.Pid)
	}
	d.out.Printf("); starting them all at once\n")
	for _, p := range procs {
		_, _ = io.WriteString(p.stdin, "go\n")
	}
	return d.collectReports(procs)
}

// startReplicas starts one replica process of rel per element of procs,
// which it fills in; deploy kills those it started if one fails to start.
func (d *demo) startReplicas(ctx context.Context, db string, rel release, procs []*replicaProc) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this program to start the replicas: %w", err)
	}
	env := append(os.Environ(), replicaEnv+"=1")
	if d.emu != nil {
		env = append(env, cmdline.EmulatorHostEnv+"="+d.emu.Host())
	}
	for i := range procs {
		cmd := exec.CommandContext(ctx, exe, "demo", "replica", "--database", db, "--table", d.opts.table,
			"--release", rel.dir, "--instance", fmt.Sprint(i+1))
		cmd.Env = env
		p := &replicaProc{cmd: cmd, stderr: &strings.Builder{}}
		cmd.Stderr = p.stderr
		if p.stdin, err = cmd.StdinPipe(); err != nil {
			return err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		p.stdout = bufio.NewReader(out)
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start replica %d: %w", i+1, err)
		}
		procs[i] = p
	}
	return nil
}

// collectReports reads each replica's report as it exits, and says it.
func (d *demo) collectReports(procs []*replicaProc) ([]replicaReport, error) {
	reports := make([]replicaReport, len(procs))
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			line, rerr := p.stdout.ReadString('\n')
			werr := p.cmd.Wait()
			var r replicaReport
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("replica %d: no report (%v, %v, %v); its stderr:\n%s", i+1, err, rerr, werr, p.stderr.String()))
				mu.Unlock()
				return
			}
			reports[i] = r
			d.sayReport(r)
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return reports, nil
}

// sayReport prints how one replica's Up ended.
func (d *demo) sayReport(r replicaReport) {
	switch {
	case r.Error != "":
		d.out.say(r.Instance, "FAILED: %s", r.Error)
	case len(r.Applied) > 0:
		d.out.say(r.Instance, "took the lock (token %d) after %v and applied migrations %v: version %d -> %d (%v)",
			r.Token, ms(r.WaitedMS), r.Applied, r.Before, r.After, ms(r.TookMS))
	default:
		d.out.say(r.Instance, "waited %v for the lock (token %d); version %d already: nothing to apply", ms(r.WaitedMS), r.Token, r.Before)
	}
}

// checkRelease prints the replicas' table and checks the release.
func (d *demo) checkRelease(ctx context.Context, client *spanner.Client, rel release, reports []replicaReport) (bool, error) {
	slices.SortFunc(reports, func(a, b replicaReport) int { return int(a.Token - b.Token) })
	var buf strings.Builder
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\n  INSTANCE\tLOCK TOKEN\tWAITED\tAPPLIED\tVERSION BEFORE -> AFTER\tDDL RETRIES\tERROR")
	var applier *replicaReport
	appliers, waited, retries := 0, 0, 0
	for i, r := range reports {
		fmt.Fprintf(tw, "  %s\t%d\t%v\t%v\t%d -> %d\t%d\t%s\n", ownerOf(r.Instance), r.Token, ms(r.WaitedMS), r.Applied, r.Before, r.After, r.DDLRetries, dash(oneLine(r.Error, 60)))
		retries += r.DDLRetries
		switch {
		case r.Error != "":
		case slices.Equal(r.Applied, rel.applies):
			appliers++
			applier = &reports[i]
		case len(r.Applied) == 0 && r.Before == rel.version:
			waited++
		}
	}
	_ = tw.Flush()
	d.out.Printf("%s\n", strings.TrimRight(buf.String(), "\n"))

	version, dirty, runs, err := readMigrationState(ctx, client)
	if err != nil {
		return false, err
	}
	d.out.Printf("  database: version %d, dirty %v; backfill runs %v; %d DDL send(s) retried after a concurrent-schema-change rejection\n\n",
		version, dirty, runs, retries)
	ok := d.check(appliers == 1, "%s was applied exactly once: one replica applied migrations %v (%d did)", rel.dir, rel.applies, appliers)
	others := len(reports) - 1
	firstToken := int64(-1)
	if applier != nil {
		firstToken = applier.Token
	}
	afterApplier := 0
	for _, r := range reports {
		if applier != nil && r.Instance != applier.Instance && r.Token > firstToken {
			afterApplier++
		}
	}
	ok = d.check(waited == others && afterApplier == others,
		"the %d other replicas waited for the lock, came after the applier (higher tokens: %d) and found version %d with nothing to apply (%d did)",
		others, afterApplier, rel.version, waited) && ok
	ok = d.check(int(version) == rel.version && !dirty, "the database is at version %d and not dirty (version %d, dirty %v)", rel.version, version, dirty) && ok
	ok = d.check(maps.Equal(runs, rel.backfill), "each backfill ran exactly once so far (want %v, counted %v)", rel.backfill, runs) && ok
	return ok, nil
}

// readMigrationState reads golang-migrate's version and the backfill
// counters.
func readMigrationState(ctx context.Context, c *spanner.Client) (version int64, dirty bool, runs map[string]int64, err error) {
	ro := c.ReadOnlyTransaction()
	defer ro.Close()
	err = ro.Query(ctx, spanner.Statement{SQL: "SELECT Version, Dirty FROM SchemaMigrations"}).Do(func(r *spanner.Row) error {
		return r.Columns(&version, &dirty)
	})
	if err != nil {
		return 0, false, nil, fmt.Errorf("read golang-migrate's version: %w", err)
	}
	runs = map[string]int64{}
	err = ro.Query(ctx, spanner.Statement{SQL: "SELECT Name, Runs FROM Backfills"}).Do(func(r *spanner.Row) error {
		var name string
		var n int64
		if err := r.Columns(&name, &n); err != nil {
			return err
		}
		runs[name] = n
		return nil
	})
	if err != nil {
		return 0, false, nil, fmt.Errorf("read the backfill counters: %w", err)
	}
	return version, dirty, runs, nil
}

// scratchDatabase creates the database the replicas migrate, holding the
// mutex table and nothing else, so that the demo can run again: on the
// embedded emulator, a new database of it; with --database, a new database
// in the same instance, dropped at the end.
func (d *demo) scratchDatabase(ctx context.Context) (db string, drop func(), err error) {
	if d.emu != nil {
		stmts, err := ddl.Statements(d.opts.table)
		if err != nil {
			return "", nil, err
		}
		db, err := d.emu.CreateDatabase(ctx, stmts...)
		return db, func() {}, err
	}
	project, instance, _, ok := cmdline.ParseDatabasePath(d.opts.database)
	if !ok {
		return "", nil, fmt.Errorf("--database %q is malformed", d.opts.database)
	}
	admin, err := dbadmin.NewDatabaseAdminClient(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("open a database admin client: %w", err)
	}
	stmts, err := ddl.Statements(d.opts.table)
	if err != nil {
		admin.Close()
		return "", nil, err
	}
	id := "demo-mig-" + d.suffix
	op, err := admin.CreateDatabase(ctx, &adminpb.CreateDatabaseRequest{
		Parent:          fmt.Sprintf("projects/%s/instances/%s", project, instance),
		CreateStatement: "CREATE DATABASE `" + id + "`",
		ExtraStatements: stmts,
	})
	if err == nil {
		_, err = op.Wait(ctx)
	}
	if err != nil {
		admin.Close()
		return "", nil, fmt.Errorf("create a database for the migration scenario next to %s: %w", d.opts.database, err)
	}
	db = fmt.Sprintf("projects/%s/instances/%s/databases/%s", project, instance, id)
	d.out.Printf("Created database %s for the migration scenarios; it is dropped at the end.\n", db)
	return db, func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = admin.DropDatabase(dctx, &adminpb.DropDatabaseRequest{Database: db})
		admin.Close()
	}, nil
}

// ms formats milliseconds for reading.
func ms(n int64) time.Duration { return (time.Duration(n) * time.Millisecond).Round(time.Millisecond) }
