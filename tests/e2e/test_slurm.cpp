// A real Slurm, on two nodes emulated on this machine (slurm_cluster.h): what runs on a cluster runs here through
// sbatch, salloc and srun, the tasks one a node and talking across the emulated link. Skipped (with the reason)
// without root, network namespaces or Slurm's programs; never passed.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "slurm_cluster.h"
#include "test_util.h"

using namespace us::test;

namespace {

// The cluster, or the test skipped when this machine cannot hold one.
void require_up(const SlurmCluster& slurm) {
    if (slurm.failure().find("cgroup") != std::string::npos)
        skip_test("slurmd cannot set up its cgroups on this machine: " + slurm.failure());
    INFO(slurm.logs());
    REQUIRE(slurm.failure().empty());
}

std::string mpi_env(const us::app::EmulatedNodes& nodes) {
    return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_tcp_if_include=" + nodes.subnet() +
           " OMPI_MCA_oob_tcp_if_include=" + nodes.subnet() + " ";
}

}  // namespace

TEST_CASE("a real Slurm on two emulated nodes: sbatch runs ultrascope run --launcher srun across them",
          "[cpu][app][hosts][nodes][slurm]") {
    if (const std::string why = why_no_emulated_nodes(); !why.empty()) skip_test(why);
    if (const std::string why = why_no_slurm(); !why.empty()) skip_test(why);
    const std::string one = temp_path("slurm-one-host.ustrace"), across = temp_path("slurm-across.ustrace");
    const std::string flags = " --dp 2 --preset tiny --steps 3";
    const ProcessResult local = run_process(bin("ultrascope") + " run -n 2" + flags + " --trace " + one);
    REQUIRE(local.exit_code == 0);
    {
        const us::app::EmulatedNodes nodes(us::app::NodeLinks{2}, 2);
        const SlurmCluster slurm(nodes, temp_path("slurm-cluster"));
        require_up(slurm);
        // The batch script runs on the first node and listens on its address, as on a cluster.
        const std::string script = temp_path("slurm-job.sh"), out = temp_path("slurm-job.out");
        write_file(script, "#!/bin/bash\n#SBATCH -N 2 -n 2\n" + bin("ultrascope") + " run --launcher srun --listen " +
                               nodes.addresses()[0] + flags + " --trace " + across + "\n");
        const ProcessResult job =
            run_process(slurm.env() + mpi_env(nodes) + "timeout 180 sbatch --wait -o " + out + " " + script);
        INFO(job.output << read_file(out) << slurm.logs());
        REQUIRE(job.exit_code == 0);
        const std::string log = read_file(out);
        // the last step's loss equals the one-host run's
        CHECK(last_progress_loss(log) == last_progress_loss(local.output));
    }
    const auto j = nlohmann::json::parse(run_process(bin("ultrascope") + " report " + across + " --json").output);
    CHECK(j["ranks"][0]["comm_hosts_by_group"]["dp"] == 2);  // one task a node: dp crossed the link
    CHECK(j["ranks"][1]["clock_uncertainty_ns"].get<int64_t>() > 0);
    CHECK(stale_emulated_nodes().empty());
}

TEST_CASE("a real Slurm on two emulated nodes: the report's workers under srun say what one process says",
          "[cpu][app][blame][nodes][slurm]") {
    if (const std::string why = why_no_emulated_nodes(); !why.empty()) skip_test(why);
    if (const std::string why = why_no_slurm(); !why.empty()) skip_test(why);
    const std::string dir = copy_kineto_run("blame/ddp_slow_rank_8", "blame-slurm");
    const ProcessResult alone = run_process(bin("ultrascope") + " report --digests --no-cache --json " + dir);
    REQUIRE(alone.exit_code == 0);
    const nlohmann::json one = nlohmann::json::parse(alone.output);
    nlohmann::json two;
    {
        const us::app::EmulatedNodes nodes(us::app::NodeLinks{2}, 2);
        const SlurmCluster slurm(nodes, temp_path("slurm-cluster-report"));
        require_up(slurm);
        const ProcessResult r =
            run_process(slurm.env() + mpi_env(nodes) + "timeout 120 salloc -N 2 -n 2 srun --mpi=pmix " +
                        bin("ultrascope") + " report --digests --no-cache --json " + dir + " 2>/dev/null");
        INFO(r.output << slurm.logs());
        REQUIRE(r.exit_code == 0);
        two = nlohmann::json::parse(r.output.substr(r.output.find('{'), r.output.rfind('}') - r.output.find('{') + 1));
    }
    CHECK(two["files"]["workers"] == 2);
    CHECK(two["blame"] == one["blame"]);
    CHECK(two["blame"]["stragglers"][0]["rank"] == 5);  // the recording's slowed rank
    CHECK(stale_emulated_nodes().empty());
}
