// writeDataflowCheckpoint / readDataflowCheckpoint: the dataflow rank's part of a checkpoint (counters, prompt cursor,
// plug-in state, config, held trajectories) in step_<V>.h5 and step_<V>.buffer.h5, each written then renamed.
#include "astraflow/dataflow/dataflow_checkpoint.hpp"

#include <fmt/format.h>

#include <system_error>

#include "astraflow/dataflow/run_wiring.hpp"
#include "astraflow/io/h5.hpp"
#include "astraflow/io/trajectory_writer.hpp"

namespace astraflow {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "astraflow-checkpoint";

constexpr int kCounters = 8;
const char* const kCounterNames[kCounters] = {"produced",      "filtered", "filtered_nonfinite", "filtered_error",
                                              "stale_dropped", "consumed", "replayed",           "batches"};

std::uint64_t* counterField(AssemblerCounters& c, int i) {
  std::uint64_t* fields[kCounters] = {&c.produced,      &c.filtered, &c.filtered_nonfinite, &c.filtered_error,
                                      &c.stale_dropped, &c.consumed, &c.replayed,           &c.batches};
  return fields[i];
}

constexpr int kPluginCounters = 6;
const char* const kPluginCounterNames[kPluginCounters] = {"admitted", "skipped",  "kept",
                                                          "dropped",  "replayed", "errors"};

std::uint64_t* pluginCounterField(PluginCounters& c, int i) {
  std::uint64_t* fields[kPluginCounters] = {&c.admitted, &c.skipped, &c.kept, &c.dropped, &c.replayed, &c.errors};
  return fields[i];
}

std::uint64_t fileBytes(const fs::path& p) {
  std::error_code ec;
  const auto n = fs::file_size(p, ec);
  return ec ? 0 : n;
}

// Writes through `write(tmp)` and renames, so an existing file is a complete one.
template <class Write>
void writeAtomically(const fs::path& path, Write write) {
  const fs::path tmp = path.string() + ".tmp";
  write(tmp.string());
  fs::rename(tmp, path);
}

}  // namespace

std::uint64_t writeDataflowCheckpoint(const fs::path& run_dir, const DataflowSnapshot& snap,
                                      const std::vector<std::string>& policies) {
  fs::create_directories(run_dir / "checkpoints");
  const fs::path buffer = bufferCheckpointPath(run_dir, snap.version);
  writeAtomically(buffer, [&](const std::string& tmp) {
    io::TrajectoryWriter writer(tmp);
    if (!snap.run_id.empty()) writer.tagRun(snap.run_id);
    for (const auto& t : snap.held) writer.append(t);
    writer.flush();
  });
  const fs::path main = checkpointPath(run_dir, snap.version);
  writeAtomically(main, [&](const std::string& tmp) {
    auto file = io::H5File::create(tmp);
    file.writeAttribute("format", kFormat);
    file.writeAttribute("part", "dataflow");
    file.writeAttribute("version", snap.version);
    if (!snap.run_id.empty()) file.writeAttribute("run_id", snap.run_id);
    file.writeAttribute("config", snap.config_text);
    std::string trainer_files;
    for (const auto& p : policies) {
      if (!trainer_files.empty()) trainer_files += ',';
      trainer_files += trainerCheckpointPath(run_dir, snap.version, p).filename().string();
    }
    file.writeAttribute("trainer_files", trainer_files);
    file.writeAttribute("buffer_file", buffer.filename().string());
    auto df = file.createGroup("dataflow");
    df.writeAttribute("next_problem", static_cast<std::int64_t>(snap.next_problem));
    df.writeAttribute("next_task_id", static_cast<std::int64_t>(snap.next_task_id));
    df.writeAttribute("next_group_id", static_cast<std::int64_t>(snap.next_group_id));
    df.writeAttribute("eval_rounds", snap.eval_rounds);
    df.writeAttribute("eval_accuracy_start", snap.eval_accuracy_start);
    df.writeAttribute("eval_best_version", snap.eval_best_version);
    df.writeAttribute("eval_best_mean", snap.eval_best_mean);
    df.writeAttribute("wall_seconds", snap.wall_seconds);
    df.writeAttribute("held_trajectories", static_cast<std::int64_t>(snap.held.size()));
    auto counters = df.createGroup("counters");
    for (const auto& [policy, c] : snap.counters) {
      auto g = counters.createGroup(policy);
      AssemblerCounters copy = c;
      for (int i = 0; i < kCounters; ++i)
        g.writeAttribute(kCounterNames[i], static_cast<std::int64_t>(*counterField(copy, i)));
    }
    auto plugins = df.createGroup("plugins");
    for (const auto& p : snap.plugins) {
      auto ds = plugins.createStrings(p.key);
      ds.appendStrings({p.state});
      PluginCounters c = p.counters;
      for (int i = 0; i < kPluginCounters; ++i) {
        ds.writeAttribute(kPluginCounterNames[i], static_cast<std::int64_t>(*pluginCounterField(c, i)));
      }
    }
    file.flush();
  });
  return fileBytes(main) + fileBytes(buffer);
}

DataflowSnapshot readDataflowCheckpoint(const fs::path& run_dir, std::int64_t version) {
  const fs::path main = checkpointPath(run_dir, version);
  const fs::path buffer = bufferCheckpointPath(run_dir, version);
  DataflowSnapshot snap;
  try {
    auto file = io::H5File::openReadOnly(main.string());
    if (file.readStringAttribute("format") != kFormat || file.readStringAttribute("part") != "dataflow") {
      throw Error("attribute format/part: not an astraflow dataflow checkpoint");
    }
    snap.version = file.readInt64Attribute("version");
    if (snap.version != version) {
      throw Error(fmt::format("attribute version: holds {}, the file name says {}", snap.version, version));
    }
    snap.config_text = file.readStringAttribute("config");
    auto df = file.openGroup("dataflow");
    snap.next_problem = static_cast<std::uint64_t>(df.readInt64Attribute("next_problem"));
    snap.next_task_id = static_cast<std::uint64_t>(df.readInt64Attribute("next_task_id"));
    snap.next_group_id = static_cast<std::uint64_t>(df.readInt64Attribute("next_group_id"));
    snap.eval_rounds = df.readInt64Attribute("eval_rounds");
    snap.eval_accuracy_start = df.readDoubleAttribute("eval_accuracy_start");
    if (df.hasAttribute("eval_best_version")) {
      snap.eval_best_version = df.readInt64Attribute("eval_best_version");
      snap.eval_best_mean = df.readDoubleAttribute("eval_best_mean");
    }
    snap.wall_seconds = df.readDoubleAttribute("wall_seconds");
    const auto held = df.readInt64Attribute("held_trajectories");
    auto counters = df.openGroup("counters");
    const std::string trainer_files = file.readStringAttribute("trainer_files");
    std::size_t start = 0;
    while (start <= trainer_files.size()) {
      auto end = trainer_files.find(',', start);
      if (end == std::string::npos) end = trainer_files.size();
      const std::string name = trainer_files.substr(start, end - start);
      // "step_<V>.<policy>.h5"
      const std::string prefix = fmt::format("step_{}.", version);
      if (name.size() > prefix.size() + 3) {
        const std::string policy = name.substr(prefix.size(), name.size() - prefix.size() - 3);
        auto g = counters.openGroup(policy);
        AssemblerCounters c;
        for (int i = 0; i < kCounters; ++i) {
          *counterField(c, i) = static_cast<std::uint64_t>(g.readInt64Attribute(kCounterNames[i]));
        }
        snap.counters.emplace_back(policy, c);
      }
      start = end + 1;
    }
    if (df.exists("plugins")) {
      auto plugins = df.openGroup("plugins");
      for (const auto& name : plugins.childNames()) {
        auto ds = plugins.openDataset(name);
        const auto states = ds.readStrings();
        if (states.size() != 1)
          throw Error(fmt::format("dataset dataflow/plugins/{}: {} rows, expected 1", name, states.size()));
        PluginSnapshot p{name, states.front(), {}};
        for (int i = 0; i < kPluginCounters; ++i) {
          *pluginCounterField(p.counters, i) =
              static_cast<std::uint64_t>(ds.readInt64Attribute(kPluginCounterNames[i]));
        }
        snap.plugins.push_back(std::move(p));
      }
    }
    try {
      snap.held = io::readTrajectories(buffer.string());
    } catch (const std::exception& e) {
      throw Error(fmt::format("{}: {}", buffer.string(), e.what()));
    }
    if (static_cast<std::int64_t>(snap.held.size()) != held) {
      throw Error(fmt::format("{}: holds {} trajectories, {} says {} (attribute dataflow/held_trajectories)",
                              buffer.string(), snap.held.size(), main.string(), held));
    }
  } catch (const std::exception& e) {
    throw Error(fmt::format("cannot resume from checkpoint {}: {}", main.string(), e.what()));
  }
  return snap;
}

}  // namespace astraflow
