// The `launch:` section, the argv of each launcher, container wrapping, and the Slurm
// batch script (quoting!) and squeue/sacct parsing, all without a cluster.
#include "launch.h"

#include <gtest/gtest.h>

#include <cstdlib>  // setenv: ch-run's USER
#include <filesystem>
#include <fstream>
#include <iterator>

#include "container.h"
#include "grid.h"
#include "process.h"  // capture
#include "slurm.h"
#include "temp_dir.h"   // TempDirTest
#include "test_util.h"  // EXPECT_CONTAINS, read_file

namespace sweep {
namespace {

namespace fs = std::filesystem;
using V = std::vector<std::string>;

std::string error_of(const std::string& text) {
  try {
    parse_grid(text, "l.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

LaunchSpec launch_of(const std::string& body) { return parse_grid("name: l\nlaunch:\n" + body, "l.yaml").launch; }

TEST(LaunchConfig, DefaultsAndEveryKey) {
  LaunchSpec d = parse_grid("name: l\n", "l.yaml").launch;
  EXPECT_EQ(d.launcher, "local");
  EXPECT_EQ(d.parallel, 1);
  EXPECT_EQ(d.timeout_s, 0);
  EXPECT_EQ(retries_for(d, FailureClass::crashed), 0);
  EXPECT_TRUE(d.container.runtime.empty());
  EXPECT_EQ(d.device, "cpu");

  LaunchSpec l = launch_of(
      "  launcher: slurm\n  parallel: 3\n  retries: 2\n  timeout_s: 90\n  grace_s: 1.5\n  device: cuda\n"
      "  slurm: {partition: gpu, time: '0:30:00', gpus: 1, mpi: pmi2, extra_args: [--qos=low, --exclusive], poll_s: "
      "2}\n"
      "  container: {runtime: apptainer, image: /img/sweep.sif, binds: [/data, '/a:/b:ro'], gpus: true}\n");
  EXPECT_EQ(l.launcher, "slurm");
  EXPECT_EQ(l.parallel, 3);
  EXPECT_EQ(l.timeout_s, 90);
  EXPECT_EQ(l.grace_s, 1.5);
  EXPECT_EQ(l.device, "cuda");
  for (FailureClass c : retryable_classes()) EXPECT_EQ(retries_for(l, c), 2) << failure_class_name(c);
  EXPECT_EQ(retries_for(l, FailureClass::config), 0);
  EXPECT_EQ(retries_for(l, FailureClass::diverged), 0);
  EXPECT_EQ(l.slurm.partition, "gpu");
  EXPECT_EQ(l.slurm.time, "0:30:00");
  EXPECT_EQ(l.slurm.gpus, 1);
  EXPECT_EQ(l.slurm.mpi, "pmi2");
  EXPECT_EQ(l.slurm.extra_args, (V{"--qos=low", "--exclusive"}));
  EXPECT_EQ(l.slurm.poll_s, 2);
  EXPECT_EQ(l.container.runtime, "apptainer");
  EXPECT_EQ(l.container.command, "apptainer");
  EXPECT_EQ(l.container.binds, (V{"/data", "/a:/b:ro"}));
  EXPECT_TRUE(l.container.gpus);

  LaunchSpec m = launch_of("  launcher: mpirun\n  hosts: [n1:4, n2:4]\n  retries: {crashed: 3, timeout: 1}\n");
  EXPECT_EQ(m.hosts, (V{"n1:4", "n2:4"}));
  EXPECT_EQ(retries_for(m, FailureClass::crashed), 3);
  EXPECT_EQ(retries_for(m, FailureClass::timeout), 1);
  EXPECT_EQ(retries_for(m, FailureClass::hang), 0);
}

TEST(LaunchConfig, IsNotPartOfTheRunId) {
  auto a = expand(parse_grid("name: a\ngrid: {train.seed: [1]}\n", "l.yaml"));
  auto b = expand(
      parse_grid("name: b\ngrid: {train.seed: [1]}\nlaunch: {parallel: 4, retries: 2, timeout_s: 5}\n", "l.yaml"));
  EXPECT_EQ(a[0].id, b[0].id);
}

TEST(LaunchConfig, Errors) {
  EXPECT_CONTAINS(
      error_of("name: l\nlaunch: {launcher: slrum}\n"),
      "l.yaml:2:20: key 'launch.launcher': expected one of local, mpirun, slurm, got 'slrum' (did you mean 'slurm'?)");
  EXPECT_CONTAINS(error_of("name: l\nlaunch: {paralel: 2}\n"),
                  "l.yaml:2:10: unknown key 'launch.paralel' (did you mean 'launch.parallel'?)");
  EXPECT_CONTAINS(error_of("name: l\nlaunch: {parallel: 0}\n"),
                  "l.yaml:2:20: key 'launch.parallel': expected an integer in [1, 100000], got '0'");
  EXPECT_CONTAINS(error_of("name: l\nlaunch: {timeout_s: -1}\n"), "key 'launch.timeout_s': expected a number in [0, ");
  EXPECT_CONTAINS(error_of("name: l\nlaunch: {device: gpu}\n"),
                  "l.yaml:2:18: key 'launch.device': expected one of cpu, cuda, got 'gpu'");
  EXPECT_CONTAINS(error_of("name: l\nlaunch: {retries: {config: 1}}\n"),
                  "l.yaml:2:20: key 'launch.retries.config': config runs are never retried");
  EXPECT_CONTAINS(error_of("name: l\nlaunch: {retries: {diverged: 1}}\n"), "diverged runs are never retried");
  EXPECT_CONTAINS(error_of("name: l\nlaunch: {retries: {crashd: 1}}\n"), "(did you mean 'launch.retries.crashed'?)");
  EXPECT_CONTAINS(error_of("name: l\nlaunch: {retries: lots}\n"),
                  "key 'launch.retries': expected an integer in [0, 100]");
  EXPECT_CONTAINS(error_of("name: l\nlaunch: {hosts: [a]}\n"), "key 'launch.hosts': only used with launcher: mpirun");
  EXPECT_CONTAINS(error_of("name: l\nlaunch: {slurm: {time: 5}}\n"),
                  "key 'launch.slurm': only used with launcher: slurm");
  EXPECT_CONTAINS(error_of("name: l\nlaunch: {launcher: slurm, slurm: {gpu: 1}}\n"),
                  "(did you mean 'launch.slurm.gpus'?)");
  EXPECT_CONTAINS(error_of("name: l\nlaunch: {container: {runtime: lxc, image: x}}\n"),
                  "key 'launch.container.runtime': expected one of apptainer, singularity, docker, podman, "
                  "charliecloud");
  EXPECT_CONTAINS(error_of("name: l\nlaunch: {container: {runtime: docker}}\n"),
                  "key 'launch.container.image': required");
  EXPECT_CONTAINS(error_of("name: l\nlaunch: {container: {runtime: docker, image: i, gpus: maybe}}\n"),
                  "key 'launch.container.gpus': expected true or false");
  EXPECT_CONTAINS(error_of("name: l\nlaunch: 3\n"), "l.yaml:2:9: key 'launch': expected a mapping");
}

TEST(LocalCommand, OneRankIsTheTrainerItselfOtherwiseSweepRankPerRank) {
  LaunchSpec spec;
  LocalLaunch local;
  local.train_binary = "/b/sweep-train";
  local.rank_wrapper = "/b/sweep-rank";
  RunCommand c = local_run_command(spec, local, 1, "/s", "/s/runs/x", "sw", false);
  EXPECT_EQ(c.argv,
            (V{"/b/sweep-train", "--config", "/s/runs/x/config.yaml", "--out", "/s/runs/x", "--sweep-id", "sw"}));
  EXPECT_EQ(c.log, "/s/runs/x/logs/rank0.log");

  c = local_run_command(spec, local, 2, "/s", "/s/runs/x", "sw", true);
  EXPECT_EQ(c.log, "/s/runs/x/logs/launcher.log");
  auto n = std::find(c.argv.begin(), c.argv.end(), "-n");
  ASSERT_NE(n, c.argv.end());
  EXPECT_EQ(*(n + 1), "2");
  V tail(n + 2, c.argv.end());
  EXPECT_EQ(tail, (V{"/b/sweep-rank", "--log-dir", "/s/runs/x/logs", "--", "/b/sweep-train", "--config",
                     "/s/runs/x/config.yaml", "--out", "/s/runs/x", "--sweep-id", "sw", "--resume"}));

  spec.launcher = "mpirun";
  spec.hosts = {"n1:2", "n2:2"};
  spec.mpi_args = {"--bind-to", "none"};
  c = local_run_command(spec, local, 4, "/s", "/s/runs/x", "sw", false);
  EXPECT_CONTAINS(c.argv.size() > 3 ? c.argv[0] : "", "mpiexec");
  auto h = std::find(c.argv.begin(), c.argv.end(), "--host");
  ASSERT_NE(h, c.argv.end());
  EXPECT_EQ(*(h + 1), "n1:2,n2:2");
  EXPECT_NE(std::find(c.argv.begin(), c.argv.end(), "--bind-to"), c.argv.end());
  EXPECT_EQ(std::find(c.argv.begin(), c.argv.end(), "--oversubscribe"),
            c.argv.end());  // remote hosts have their own cores
  spec.hosts.clear();
  spec.hostfile = "/etc/hosts.mpi";
  c = local_run_command(spec, local, 4, "/s", "/s/runs/x", "sw", false);
  h = std::find(c.argv.begin(), c.argv.end(), "--hostfile");
  ASSERT_NE(h, c.argv.end());
  EXPECT_EQ(*(h + 1), "/etc/hosts.mpi");

  // launch.device reaches every rank's sweep-train, and only when it is not cpu.
  spec.device = "cuda";
  c = local_run_command(spec, local, 4, "/s", "/s/runs/x", "sw", false);
  EXPECT_EQ(V(c.argv.end() - 2, c.argv.end()), (V{"--device", "cuda"}));
  spec = LaunchSpec{};
  spec.device = "cuda";
  c = local_run_command(spec, local, 1, "/s", "/s/runs/x", "", false);
  EXPECT_EQ(c.argv,
            (V{"/b/sweep-train", "--config", "/s/runs/x/config.yaml", "--out", "/s/runs/x", "--device", "cuda"}));
}

TEST(Container, ApptainerAndDockerWrapEachRank) {
  ContainerSpec a;
  a.runtime = "apptainer";
  a.command = "apptainer";
  a.image = "/img/s.sif";
  a.binds = {"/data"};
  a.gpus = true;
  V cmd = {"sweep-train", "--out", "/s/runs/x"};
  EXPECT_EQ(wrap_in_container(a, "/s", cmd), (V{"apptainer", "exec", "--bind", "/s:/s", "--bind", "/data", "--nv",
                                                "--pwd", "/s", "/img/s.sif", "sweep-train", "--out", "/s/runs/x"}));
  ContainerSpec d;
  d.runtime = "docker";
  d.command = "docker";
  d.image = "sweep:cpu";
  V w = wrap_in_container(d, "/s", cmd);
  EXPECT_EQ(w[0], "docker");
  EXPECT_EQ(w[1], "run");
  EXPECT_NE(std::find(w.begin(), w.end(), "--network=host"), w.end());
  EXPECT_NE(std::find(w.begin(), w.end(), "/s:/s"), w.end());
  auto img = std::find(w.begin(), w.end(), "sweep:cpu");
  ASSERT_NE(img, w.end());
  EXPECT_EQ(*(img - 1), kRankEnvPlaceholder);
  EXPECT_EQ(V(img + 1, w.end()), cmd);
  EXPECT_EQ(wrap_in_container(ContainerSpec{}, "/s", cmd), cmd);

  // In a launch, the trainer path is the image's.
  LaunchSpec spec;
  spec.container = a;
  spec.container.trainer = "/opt/sweep/bin/sweep-train";
  LocalLaunch local;
  local.train_binary = "/host/sweep-train";
  local.rank_wrapper = "/b/sweep-rank";
  RunCommand c = local_run_command(spec, local, 1, "/s", "/s/runs/x", "", false);
  EXPECT_EQ(c.argv[0], "/b/sweep-rank");
  EXPECT_NE(std::find(c.argv.begin(), c.argv.end(), "/opt/sweep/bin/sweep-train"), c.argv.end());
  EXPECT_EQ(std::find(c.argv.begin(), c.argv.end(), "/host/sweep-train"), c.argv.end());
}

TEST(Container, CharliecloudRunsEachRankThroughChRun) {
  LaunchSpec l = launch_of("  container: {runtime: charliecloud, image: /img/sweep, binds: [/data, '/a:/b']}\n");
  const ContainerSpec& c = l.container;
  EXPECT_EQ(c.command, "ch-run");  // the runtime is charliecloud, its program ch-run
  V cmd = {"env", "SWEEP_CONTAINER_RUNTIME=charliecloud", "sweep-train", "--out", "/s/runs/x"};
  // ch-run refuses to start without USER: given with env (no shell) only when unset here.
  const char* had = std::getenv("USER");
  const std::string saved = had ? had : "";
  ::setenv("USER", "someone", 1);
  EXPECT_EQ(wrap_in_container(c, "/s", cmd),
            (V{"ch-run", "-b", "/s:/s", "-b", "/data", "-b", "/a:/b", "--cd", "/s", "/img/sweep", "--", "env",
               "SWEEP_CONTAINER_RUNTIME=charliecloud", "sweep-train", "--out", "/s/runs/x"}));
  ::unsetenv("USER");
  V w = wrap_in_container(c, "/s", cmd);
  ASSERT_GE(w.size(), 3u);
  EXPECT_EQ(w[0], "env");
  EXPECT_EQ(w[1].rfind("USER=", 0), 0u) << w[1];
  EXPECT_GT(w[1].size(), 5u) << "a name, never empty";
  EXPECT_EQ(w[2], "ch-run");
  if (had) ::setenv("USER", saved.c_str(), 1);
  EXPECT_FALSE(container_needs_rank_env(c)) << "ch-run passes the host environment itself";

  // A rank under mpiexec: sweep-rank, then ch-run, then the image's trainer.
  LaunchSpec spec;
  spec.container = c;
  spec.container.trainer = "/opt/sweep/bin/sweep-train";
  LocalLaunch local;
  local.train_binary = "/host/sweep-train";
  local.rank_wrapper = "/b/sweep-rank";
  RunCommand r = local_run_command(spec, local, 2, "/s", "/s/runs/x", "sw", false);
  const auto ch = std::find(r.argv.begin(), r.argv.end(), "ch-run");
  ASSERT_NE(ch, r.argv.end());
  EXPECT_EQ(*(std::find(r.argv.begin(), r.argv.end(), "/b/sweep-rank") + 4), had ? "ch-run" : "env");
  const auto dashes = std::find(ch, r.argv.end(), "--");
  ASSERT_NE(dashes, r.argv.end());
  EXPECT_EQ(*(dashes - 1), "/img/sweep");
  EXPECT_EQ(*(dashes + 1), "/opt/sweep/bin/sweep-train");
  EXPECT_EQ(std::find(r.argv.begin(), r.argv.end(), kRankEnvPlaceholder), r.argv.end());

  // What ch-run cannot honour is refused where the grid says it, not at run time.
  EXPECT_CONTAINS(error_of("name: l\nlaunch:\n  container: {runtime: charliecloud, image: /i, gpus: true}\n"),
                  "l.yaml:3:55: key 'launch.container.gpus': charliecloud has no run-time GPU switch: inject the "
                  "host's NVIDIA libraries into the image once (ch-fromhost --nvidia IMAGE)");
  EXPECT_CONTAINS(error_of("name: l\nlaunch:\n  container: {runtime: charliecloud, image: /i, binds: ['/a:/b:ro']}\n"),
                  "key 'launch.container.binds': charliecloud binds are host[:container], without options");
  EXPECT_EQ(
      launch_of("  container: {runtime: charliecloud, image: /i, command: /opt/ch/bin/ch-run}\n").container.command,
      "/opt/ch/bin/ch-run");
}

class SlurmScript : public sweep_test::TempDirTest {
 protected:
  SlurmScript() : TempDirTest("slurm_script") {}
  /// Writes `script` (sbatch_script's) to batch.sh and runs it as task `task` of its array,
  /// with a stand-in srun that prints its argv one [item] a line; returns what the task's
  /// run directory `run_dir` got in logs/launcher.log.
  std::string run_task(const std::string& script, const std::string& run_dir, int task) const {
    const std::string bin = (dir_ / "bin").string();
    fs::create_directories(bin);
    std::ofstream(bin + "/srun") << "#!/bin/sh\nfor a in \"$@\"; do printf '[%s]\\n' \"$a\"; done\n";
    fs::permissions(bin + "/srun", fs::perms::owner_all);
    std::ofstream(dir_ / "batch.sh") << script;
    fs::create_directories(run_dir + "/logs");
    Captured c = capture({"/usr/bin/env", "PATH=" + bin + ":/usr/bin:/bin",
                          "SLURM_ARRAY_TASK_ID=" + std::to_string(task), "/bin/bash", (dir_ / "batch.sh").string()});
    EXPECT_EQ(c.status.code, 0) << c.output;
    std::ifstream in(run_dir + "/logs/launcher.log");
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }
};

TEST_F(SlurmScript, EveryValueArrivesLiterally) {
  // A sweep dir and run dirs full of shell syntax; the script must hand them over as text.
  const std::string evil = (dir_ / "s $(touch pwned) '; rm -rf x; ` \" \\ $HOME").string();
  SlurmArray a;
  a.sweep_name = "n";
  a.sweep_dir = evil;
  a.world = 2;
  a.dirs = {evil + "/runs/a", evil + "/runs/b'c"};
  a.resume = {false, true};
  LaunchSpec spec;
  spec.launcher = "slurm";
  spec.slurm.mpi = "pmix";
  LocalLaunch local;
  local.train_binary = "/b/sweep train";
  local.rank_wrapper = "/b/sweep-rank";
  const std::string script = sbatch_script(a, spec, local);
  for (int task : {0, 1}) {
    const std::string log = run_task(script, a.dirs[task], task);
    EXPECT_CONTAINS(log, "[--mpi=pmix]\n[-n]\n[2]\n[--kill-on-bad-exit=1]\n[/b/sweep-rank]\n[--log-dir]\n[" +
                             a.dirs[task] + "/logs]\n[--]\n[/b/sweep train]\n[--config]\n[" + a.dirs[task] +
                             "/config.yaml]\n[--out]\n[" + a.dirs[task] + "]\n[--sweep-id]\n[n]\n");
    EXPECT_EQ(log.find("--resume") != std::string::npos, task == 1) << log;
    std::ifstream ex(a.dirs[task] + "/slurm-exit");
    int rc = -1;
    ex >> rc;
    EXPECT_EQ(rc, 0);
  }
  EXPECT_FALSE(fs::exists("pwned"));
  EXPECT_FALSE(fs::exists(dir_ / "pwned"));
  EXPECT_FALSE(fs::exists(dir_ / "s $(touch pwned) '; rm -rf x; ` \" \\ $HOME" / "pwned"));
}

// A pbt member's exploit under Slurm: the task that forks gets --fork-from and its
// parent's checkpoint, as one literal argument after sweep-train's own; the task that
// does not fork gets neither. Without forks the script has no forks array at all.
TEST_F(SlurmScript, AForkArrivesLiterallyAsTheLastArguments) {
  const std::string evil = (dir_ / "f $(touch pwned) ' \" $HOME").string();
  SlurmArray a;
  a.sweep_name = "n";
  a.sweep_dir = evil;
  a.dirs = {evil + "/runs/a", evil + "/runs/b"};
  a.resume = {false, true};
  const std::string parent = evil + "/runs/p'q/checkpoints/step_0000000006";
  a.fork_from = {parent, ""};
  LaunchSpec spec;
  spec.launcher = "slurm";
  LocalLaunch local;
  local.train_binary = "/b/sweep-train";
  const std::string script = sbatch_script(a, spec, local);
  for (int task : {0, 1}) {
    const std::string log = run_task(script, a.dirs[task], task);
    if (task == 0)
      EXPECT_CONTAINS(log, "[--sweep-id]\n[n]\n[--fork-from]\n[" + parent + "]\n");
    else
      EXPECT_EQ(log.find("--fork-from"), std::string::npos) << log;
    EXPECT_EQ(log.find("--resume") != std::string::npos, task == 1) << log;
  }
  EXPECT_FALSE(fs::exists(dir_ / "pwned"));
  a.fork_from = {"", ""};
  EXPECT_EQ(sbatch_script(a, spec, local).find("forks"), std::string::npos);
}

TEST_F(SlurmScript, SbatchArgvCarriesShapeThrottleAndLimits) {
  SlurmArray a;
  a.sweep_name = "n";
  a.sweep_dir = "/s";
  a.world = 4;
  a.threads = 2;
  a.dirs = {"/s/runs/a", "/s/runs/b", "/s/runs/c"};
  a.resume = {false, false, false};
  LaunchSpec spec;
  spec.parallel = 2;
  spec.slurm.partition = "p";
  spec.slurm.gpus = 1;
  spec.slurm.extra_args = {"--qos=x y"};
  spec.timeout_s = 61;
  V argv = sbatch_argv(a, spec, "/s/slurm/batch-1.sh");
  EXPECT_EQ(argv, (V{"sbatch", "--parsable", "--job-name=sweep-n", "--array=0-2%2", "--ntasks=4", "--nodes=1",
                     "--cpus-per-task=2", "--chdir=/s", "--no-requeue", "--output=/s/slurm/%A_%a.out", "--partition=p",
                     "--time=2", "--gpus-per-node=1", "--qos=x y", "/s/slurm/batch-1.sh"}));
  spec.slurm.time = "0:20";
  a.sweep_dir = "/s/100%";
  argv = sbatch_argv(a, spec, "x.sh");
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--time=0:20"), argv.end());
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--output=/dev/null"), argv.end());
}

TEST(SlurmArgv, AccountQosConstraintAndGpusAreOptionsOfTheirOwn) {
  SlurmArray a;
  a.sweep_name = "n";
  a.sweep_dir = "/s";
  a.dirs = {"/s/runs/a", "/s/runs/b", "/s/runs/c"};
  a.resume = {false, false, false};
  a.throttle = 2;  // the executor's share of launch.parallel for this array
  LaunchSpec spec = parse_grid(
                        "name: n\nlaunch: {launcher: slurm, parallel: 8, slurm: {account: 'proj-1', qos: high, "
                        "constraint: 'a100|h100', gpus_per_task: 1}}\n",
                        "g.yaml")
                        .launch;
  V argv = sbatch_argv(a, spec, "/s/slurm/batch-1.sh");
  auto has = [&](const std::string& arg) { return std::find(argv.begin(), argv.end(), arg) != argv.end(); };
  EXPECT_TRUE(has("--array=0-2%2")) << "the array's own throttle, not launch.parallel";
  EXPECT_TRUE(has("--account=proj-1"));
  EXPECT_TRUE(has("--qos=high"));
  EXPECT_TRUE(has("--constraint=a100|h100")) << "one argv element: no shell reads the '|'";
  EXPECT_TRUE(has("--gpus-per-task=1"));
  EXPECT_FALSE(has("--gpus-per-node=0"));
  spec.slurm.gpus_per_task = 0;
  spec.slurm.gpus = 4;
  argv = sbatch_argv(a, spec, "/s/slurm/batch-1.sh");
  EXPECT_TRUE(has("--gpus-per-node=4"));
  EXPECT_EQ(argv.back(), "/s/slurm/batch-1.sh");

  EXPECT_EQ(error_of("name: l\nlaunch: {launcher: slurm, slurm: {account: 'my proj'}}\n"),
            "l.yaml:2:44: key 'launch.slurm.account': expected an account name without blanks, got 'my proj'");
  EXPECT_CONTAINS(error_of("name: l\nlaunch: {launcher: slurm, slurm: {qos: \"a\\tb\"}}\n"),
                  "key 'launch.slurm.qos': expected a QOS name without blanks");
  EXPECT_CONTAINS(error_of("name: l\nlaunch: {launcher: slurm, slurm: {constraint: [a, b]}}\n"),
                  "key 'launch.slurm.constraint': expected a single value");
  EXPECT_CONTAINS(error_of("name: l\nlaunch: {launcher: slurm, slurm: {gpus: 2, gpus_per_task: 1}}\n"),
                  "key 'launch.slurm.gpus_per_task': give GPUs per node (gpus) or per rank (gpus_per_task), not both");
  EXPECT_CONTAINS(error_of("name: l\nlaunch: {launcher: slurm, slurm: {acount: x}}\n"),
                  "(did you mean 'launch.slurm.account'?)");
  EXPECT_CONTAINS(error_of("name: l\nlaunch: {launcher: slurm, slurm: {gpus_per_task: -1}}\n"),
                  "key 'launch.slurm.gpus_per_task': expected an integer in [0, 1024]");
}

TEST(SlurmParse, LimitsFromScontrolShowConfig) {
  const SlurmLimits l = parse_slurm_limits(
      "Configuration data as of 2026-12-04T23:00:00\nMaxArraySize            = 50\nMaxJobCount             = 10000\n"
      "MaxJobId                = 67043328\n");
  EXPECT_TRUE(l.read);
  EXPECT_EQ(l.max_array_size, 50);
  EXPECT_EQ(l.max_job_count, 10000);
  const SlurmLimits d = parse_slurm_limits("slurm_load_ctl_conf error: Unable to contact slurm controller\n");
  EXPECT_FALSE(d.read);
  EXPECT_EQ(d.max_array_size, 1001) << "Slurm's default";
  EXPECT_EQ(d.max_job_count, 10000);
  EXPECT_EQ(parse_slurm_limits("MaxArraySize = lots\nMaxJobCount = 5\n").max_array_size, 1001);
}

TEST(SlurmParse, OnlyReasonsNoWaitClearsArePermanent) {
  for (const char* r : {"PartitionNodeLimit", "PartitionTimeLimit", "PartitionConfig", "InvalidAccount", "InvalidQOS",
                        "BadConstraints", "QOSMaxWallDurationPerJobLimit"})
    EXPECT_TRUE(slurm_reason_permanent(r)) << r;
  for (const char* r : {"None", "Priority", "Resources", "JobArrayTaskLimit", "ReqNodeNotAvail, UnavailableNodes:n2",
                        "PartitionDown", "QOSMaxJobsPerUserLimit", "AssocGrpCpuLimit", "BeginTime", "Dependency", ""})
    EXPECT_FALSE(slurm_reason_permanent(r)) << r;
}

TEST(SlurmParse, AThrottleUpdateOnAnArrayWithFinishedTasksStillUpdatedIt) {
  // scontrol 22.05 on an array whose first tasks have ended: exit 1, one line per task.
  EXPECT_TRUE(throttle_updated(false, "504_0: Job has already finished\n504_1: No error\n"));
  EXPECT_TRUE(throttle_updated(true, ""));
  // Refusals: nothing updated, or a line that is not one of the two answers.
  EXPECT_FALSE(throttle_updated(false, "504_0: Job has already finished\n"));
  EXPECT_FALSE(throttle_updated(false, "504_0: Job has already finished\n504_1: Access/permission denied\n"));
  EXPECT_FALSE(throttle_updated(false, "slurm_update error: Invalid job id specified\n"));
  EXPECT_FALSE(throttle_updated(false, ""));
}

TEST(SlurmParse, SqueueSacctAndStates) {
  auto q = parse_squeue(
      "12_0|COMPLETED|None\n12_1|RUNNING|None\n12_[2-4,7%2]|PENDING|JobArrayTaskLimit\n13|TIMEOUT\n"
      "14_[0-2]|PENDING|ReqNodeNotAvail, UnavailableNodes:n2\n  \n");
  EXPECT_EQ(q.at("12_0").state, "COMPLETED");
  EXPECT_EQ(q.at("12_1").state, "RUNNING");
  EXPECT_EQ(q.at("12_3").state, "PENDING");
  EXPECT_EQ(q.at("12_3").reason, "JobArrayTaskLimit");
  EXPECT_EQ(q.at("12_7").state, "PENDING");
  EXPECT_EQ(q.count("12_5"), 0u);
  EXPECT_EQ(q.at("13").state, "TIMEOUT");
  EXPECT_EQ(q.at("13").reason, "");
  EXPECT_EQ(q.at("14_2").reason, "ReqNodeNotAvail, UnavailableNodes:n2");
  auto s = parse_sacct("20_0|TIMEOUT\n20_0.batch|CANCELLED\n20_1|CANCELLED by 0\n20_2|OUT_OF_MEMORY\n");
  EXPECT_EQ(s.at("20_0").state, "TIMEOUT");
  EXPECT_EQ(s.at("20_1").state, "CANCELLED");
  EXPECT_EQ(s.at("20_2").state, "OUT_OF_MEMORY");
  EXPECT_EQ(s.count("20_0.batch"), 0u);
  EXPECT_FALSE(slurm_state_final("PENDING"));
  EXPECT_FALSE(slurm_state_final("RUNNING"));
  EXPECT_FALSE(slurm_state_final("COMPLETING"));
  EXPECT_TRUE(slurm_state_final("COMPLETED"));
  EXPECT_TRUE(slurm_state_final("TIMEOUT"));
  EXPECT_EQ(slurm_failure_class("COMPLETED"), FailureClass::none);
  EXPECT_EQ(slurm_failure_class("TIMEOUT"), FailureClass::timeout);
  EXPECT_EQ(slurm_failure_class("OUT_OF_MEMORY"), FailureClass::oom);
  EXPECT_EQ(slurm_failure_class("NODE_FAIL"), FailureClass::node_fail);
  EXPECT_EQ(slurm_failure_class("PREEMPTED"), FailureClass::preempted);
  EXPECT_EQ(slurm_failure_class("CANCELLED"), FailureClass::cancelled);
  EXPECT_EQ(slurm_failure_class("FAILED"), FailureClass::crashed);
  EXPECT_EQ(slurm_minutes(61), "2");
  EXPECT_EQ(slurm_minutes(1), "1");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
}

}  // namespace
}  // namespace sweep
