// A real Slurm on nodes emulated on this machine, for the e2e suite (docs/nodes.md): a munged of its own, slurmctld
// on the bridge, and one slurmd in each node's network namespace (with the node's hostname and, in a private mount
// namespace, the cgroup mounts slurmd 22.05 insists on and a /tmp-like folder of the node's own for PMIx), every file
// in one folder. Jobs then run as on a cluster: sbatch, salloc and srun --mpi=pmix place one task a node, and the
// tasks talk TCP across the emulated links. Everything is stopped and removed when the object goes.
#pragma once

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <unistd.h>

#include "app/launch/emulated_nodes.h"
#include "test_util.h"

namespace us::test {

// Why a real Slurm cannot run here (its programs missing), or empty.
inline std::string why_no_slurm() {
    for (const char* program : {"slurmctld", "slurmd", "srun", "sbatch", "munged"})
        if (run_process(std::string("command -v ") + program).exit_code != 0)
            return std::string(program) + " is missing (apt-get install slurmctld slurmd slurm-client munge)";
    return "";
}

class SlurmCluster {
public:
    SlurmCluster(const us::app::EmulatedNodes& nodes, const std::string& dir) : m_dir(dir), m_nodes(nodes.names()) {
        namespace fs = std::filesystem;
        fs::remove_all(m_dir);
        fs::create_directories(m_dir + "/ctld");
        // Ports of this process's own: ctest runs tests side by side.
        const int port = 20000 + int(getpid() % 20000);
        const bool cgroup_v2 = run_process("grep -qv '^0::' /proc/self/cgroup").exit_code != 0;
        std::ofstream conf(m_dir + "/slurm.conf");
        conf << "ClusterName=us\nSlurmctldHost=" << hostname() << "(" << nodes.bridge_address() << ")\n"
             << "SlurmUser=root\nSlurmdUser=root\nAuthType=auth/munge\nCredType=cred/munge\n"
             << "AuthInfo=socket=" << m_dir << "/munge.sock\nMailProg=/bin/true\n"
             << "StateSaveLocation=" << m_dir << "/ctld\nSlurmdSpoolDir=" << m_dir << "/spool-%n\n"
             << "SlurmctldPidFile=" << m_dir << "/slurmctld.pid\nSlurmdPidFile=" << m_dir << "/slurmd-%n.pid\n"
             << "SlurmctldLogFile=" << m_dir << "/slurmctld.log\nSlurmdLogFile=" << m_dir << "/slurmd-%n.log\n"
             << "SlurmctldPort=" << port << "\nSlurmdPort=" << port + 1 << "\n"
             << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nMpiDefault=none\n"
             << "SchedulerType=sched/builtin\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
             << "ReturnToService=2\nJobCompType=jobcomp/none\nAccountingStorageType=accounting_storage/none\n";
        for (size_t i = 0; i < m_nodes.size(); ++i)
            conf << "NodeName=" << m_nodes[i] << " NodeAddr=" << nodes.addresses()[i] << " CPUs=2 State=UNKNOWN\n";
        conf << "PartitionName=emulated Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE\n";
        conf.close();
        std::ofstream(m_dir + "/cgroup.conf") << (cgroup_v2 ? "CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n"
                                                            : "CgroupPlugin=cgroup/v1\nCgroupAutomount=yes\n");
        // Each node's PMIx folder at one path, a different folder behind it on each node.
        std::ofstream(m_dir + "/mpi.conf") << "PMIxCliTmpDirBase=" << m_dir << "/node-tmp\n";
        const std::string cgroups =
            cgroup_v2 ? "mount -t cgroup2 none /sys/fs/cgroup"
                      : "mount -t tmpfs cg /sys/fs/cgroup && for c in freezer cpuset memory devices; do mkdir -p "
                        "/sys/fs/cgroup/$c && mount -t cgroup -o $c cg /sys/fs/cgroup/$c; done";
        std::string script = "set -e\ncd " + m_dir + "\n(mungekey -c -f -k munge.key 2>/dev/null || " +
                             "head -c 1024 /dev/urandom > munge.key)\nchmod 600 munge.key\n" + "munged --force -S " +
                             m_dir + "/munge.sock --key-file=munge.key --pid-file=" + m_dir +
                             "/munged.pid --seed-file=munge.seed --log-file=" + m_dir + "/munged.log\n" +
                             "SLURM_CONF=" + m_dir + "/slurm.conf slurmctld\n";
        for (const std::string& node : m_nodes)
            script += "mkdir -p node-tmp tmp-" + node + " spool-" + node + "\nip netns exec " + node +
                      " unshare --uts --mount --propagation private sh -c '" + cgroups + " && mount --bind " + m_dir +
                      "/tmp-" + node + " " + m_dir + "/node-tmp && hostname " + node + " && SLURM_CONF=" + m_dir +
                      "/slurm.conf exec slurmd -N " + node + "'\n";
        std::ofstream(m_dir + "/up.sh") << script;
        const ProcessResult up = run_process("bash " + m_dir + "/up.sh");
        m_started = true;
        if (up.exit_code != 0) {
            m_failure = "starting Slurm failed: " + up.output;
            return;
        }
        // Up when every node is idle (slurmd registered with slurmctld).
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (std::chrono::steady_clock::now() < give_up) {
            const ProcessResult states = run_process(env() + "sinfo -h -o %t");
            if (states.exit_code == 0 && states.output.find("idle") != std::string::npos &&
                states.output.find_first_not_of("idle\n") == std::string::npos)
                return;
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
        m_failure = "the nodes did not register with slurmctld within 30 s: " + logs();
    }

    ~SlurmCluster() {
        if (!m_started) return;
        // The daemons by their pid files (slurmctld, munged, each slurmd): TERM, a few seconds, then KILL.
        std::string pids = "slurmctld.pid munged.pid";
        for (const std::string& node : m_nodes) pids += " slurmd-" + node + ".pid";
        run_process(
            "cd " + m_dir + " && p=$(cat " + pids + " 2>/dev/null); kill $p 2>/dev/null; " +
            "for i in $(seq 50); do kill -0 $p 2>/dev/null || break; sleep 0.1; done; kill -9 $p 2>/dev/null; " +
            "true");
        std::filesystem::remove_all(m_dir);
    }

    // Empty when the cluster is up; else what went wrong.
    const std::string& failure() const { return m_failure; }
    // The environment a Slurm command needs here ("SLURM_CONF=... ").
    std::string env() const { return "SLURM_CONF=" + m_dir + "/slurm.conf "; }
    std::string logs() const {
        return run_process("tail -n 5 " + m_dir + "/slurmctld.log " + m_dir + "/slurmd-*.log 2>&1").output;
    }

private:
    static std::string hostname() {
        char name[256] = {};
        gethostname(name, sizeof name - 1);
        std::string s = name;
        return s.substr(0, s.find('.'));
    }

    std::string m_dir;
    std::vector<std::string> m_nodes;
    std::string m_failure;
    bool m_started = false;
};

}  // namespace us::test
