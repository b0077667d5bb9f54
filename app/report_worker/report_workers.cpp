// Workers of a distributed report (report_workers.h).
#include "app/report_worker/report_workers.h"

// MPI's C interface only (its C++ bindings are deprecated and would need their own library)
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <string>

#include "app/report_worker/worker_launch.h"
#include "common/core/check.h"

namespace us::app {

namespace {

// What one worker sends: its digests' compact bytes, then its errors and warnings, each length-prefixed.
std::string pack(const prof::RunDigests& d) {
    std::string out;
    auto put = [&](const std::string& s) {
        const uint64_t n = s.size();
        out.append(reinterpret_cast<const char*>(&n), sizeof n);
        out += s;
    };
    put(std::to_string(d.ranks.size()));
    for (const prof::RankDigest& r : d.ranks) put(prof::digest_bytes(r));
    put(nlohmann::json{{"errors", d.errors},
                       {"warnings", d.warnings},
                       {"from_cache", d.from_cache},
                       {"made", d.made},
                       {"trace_bytes", d.trace_bytes},
                       {"digest_bytes", d.digest_bytes}}
            .dump());
    return out;
}

void unpack(const char* data, size_t size, int worker, prof::RunDigests& into) {
    size_t at = 0;
    auto get = [&]() {
        uint64_t n = 0;
        US_CHECK_INPUT(at + sizeof n <= size, "worker {} sent a cut message", worker);
        std::memcpy(&n, data + at, sizeof n);
        at += sizeof n;
        US_CHECK_INPUT(n <= size - at, "worker {} sent a cut message", worker);
        std::string s(data + at, n);
        at += n;
        return s;
    };
    const size_t count = std::stoul(get());
    for (size_t i = 0; i < count; ++i)
        into.ranks.push_back(prof::digest_from_bytes(get(), fmt::format("worker {}'s digest {}", worker, i)));
    const nlohmann::json j = nlohmann::json::parse(get());
    for (const auto& e : j["errors"]) into.errors.push_back(e);
    for (const auto& w : j["warnings"]) into.warnings.push_back(w);
    into.from_cache += j["from_cache"].get<size_t>(), into.made += j["made"].get<size_t>();
    into.trace_bytes += j["trace_bytes"].get<uint64_t>(), into.digest_bytes += j["digest_bytes"].get<uint64_t>();
}

}  // namespace

ReportWorkers start_report_workers() {
    ReportWorkers w;
    if (launched_worker_count() <= 1) return w;
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w.size);
    w.mpi = true;
    return w;
}

void stop_report_workers(const ReportWorkers& w) {
    if (w.mpi) MPI_Finalize();
}

void abort_report_workers(const ReportWorkers& w, int code) {
    if (w.mpi && w.size > 1) MPI_Abort(MPI_COMM_WORLD, code);
    if (w.mpi) MPI_Finalize();
}

prof::RunDigests gather_digests(prof::RunDigests mine, const ReportWorkers& w) {
    if (w.size <= 1) return mine;
    const std::string sent = pack(mine);
    US_CHECK_INPUT(sent.size() < (size_t(1) << 31), "worker {}'s digests are over 2 GiB: run more workers", w.rank);
    int length = int(sent.size());
    std::vector<int> lengths(size_t(w.size)), offsets(size_t(w.size));
    MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    std::string all;
    if (w.rank == 0) {
        size_t total = 0;
        for (int i = 0; i < w.size; ++i) offsets[size_t(i)] = int(total), total += size_t(lengths[size_t(i)]);
        US_CHECK_INPUT(total < (size_t(1) << 31), "the workers' digests are over 2 GiB together");
        all.resize(total);
    }
    MPI_Gatherv(sent.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
    if (w.rank != 0) return {};
    prof::RunDigests out;
    out.seconds = mine.seconds;
    for (int i = 0; i < w.size; ++i) unpack(all.data() + offsets[size_t(i)], size_t(lengths[size_t(i)]), i, out);
    std::sort(out.ranks.begin(), out.ranks.end(),
              [](const prof::RankDigest& a, const prof::RankDigest& b) { return a.rank < b.rank; });
    for (size_t i = 1; i < out.ranks.size(); ++i)
        if (out.ranks[i].rank == out.ranks[i - 1].rank)
            out.errors.push_back(fmt::format("'{}' and '{}' both claim rank {}: give one file per rank",
                                             out.ranks[i - 1].file, out.ranks[i].file, out.ranks[i].rank));
    out.ranks.erase(std::unique(out.ranks.begin(), out.ranks.end(),
                                [](const prof::RankDigest& a, const prof::RankDigest& b) { return a.rank == b.rank; }),
                    out.ranks.end());
    return out;
}

}  // namespace us::app
