#pragma once

// The update modes, in one table: each mode's name, its label and colour in
// the window, what it means, which of ModeConfig's numbers it reads, and the
// short written form of a mode with its numbers (a "mode spec") that command
// lines and the mode comparison take. Parsers, logs, replay, charts, the
// designer, the mode buttons and the comparison all read this table, so a
// new mode is a row here, its enum value in the proto and its update rule
// in engine/update_policy (docs/reference.md, "Update modes").

#include "proto/parasync.pb.h"

#include <string>
#include <vector>

class QJsonObject;

namespace parasync {

// Which of ModeConfig's numbers a mode reads besides its name; the others
// are left as they are (a switch from ssp to async and back keeps the bound).
struct ModeKnobs
{
    bool staleness = false;     // staleness: the bound on the workers' spread
    bool replicas = false;      // replicas_to_aggregate and total_num_replicas
    bool stalenessRule = false; // learning_rate_by_staleness (Zhang et al.)
};

struct UpdateModeInfo
{
    proto::UpdateMode mode;
    const char *name;     // "ssp": flags, cluster files, run directories
    const char *label;    // "Semi-sync (SSP)": buttons and menus
    const char *meaning;  // one line, for help texts and tooltips
    const char *specForm; // how its spec is written, e.g. "ssp:STALENESS"
    ModeKnobs knobs;
    // A gradient may be any number of updates old when it is applied: the
    // designer warns when many workers and a large learning rate meet.
    bool unboundedStaleness;
    unsigned rgb; // 0xRRGGBB: the mode's colour where runs of several modes are drawn
};

// Every mode a cluster can train in, in the order help texts, buttons and
// the demo's tour list them.
const std::vector<UpdateModeInfo> &updateModes();
// The mode's row, or nullptr for a mode outside the table (unspecified).
const UpdateModeInfo *findUpdateMode(proto::UpdateMode mode);

// "async" / "sync" / "ssp" and back (any letter case in). parseUpdateMode
// throws InputError naming the known modes; updateModeName gives
// "unspecified" for a mode outside the table.
proto::UpdateMode parseUpdateMode(const std::string &text);
std::string updateModeName(proto::UpdateMode mode);
// The table's names as a flag's value form, "async|sync|ssp", and each
// with its meaning, "async: ...; sync: ...; ssp: ...": for help texts.
std::string updateModeChoices();
std::string updateModeMeanings();

// "sync (replicas_to_aggregate=2, total_num_replicas=2)", "ssp (staleness=10)",
// "async, learning rate / staleness".
std::string describeMode(const proto::ModeConfig &mode);
// Whether two modes are the same in every field (the window compares what
// ps:0 reports with what it asked for).
bool sameMode(const proto::ModeConfig &a, const proto::ModeConfig &b);

// A mode as cluster.json's "training" section and the step log's mode_change
// records write it ("mode", "staleness", "replicas_to_aggregate",
// "total_num_replicas", "learning_rate_by_staleness"); a missing or unknown
// name reads as unspecified.
proto::ModeConfig modeFromJson(const QJsonObject &object);

// A mode with its numbers in a few characters, as the comparison's
// contenders are given (--modes=async,sync,sync:3/4,ssp:10):
//   async
//   sync          every live worker's gradient in each step
//   sync:R        R gradients per step, of every worker
//   sync:R/T      R of T replicas: T - R backup workers (Chen et al., 2016)
//   ssp:S         staleness bound S (ssp alone: 10, the demo's bound)
// async and ssp take kStalenessRuleSuffix, "+lr/staleness": the learning
// rate divided by each gradient's staleness (Zhang et al., 2016;
// ModeConfig.learning_rate_by_staleness), e.g. async+lr/staleness.
// parseModeSpec throws InputError saying what to write; modeSpec(parse(x))
// gives x back in this form.
proto::ModeConfig parseModeSpec(const std::string &text);
std::string modeSpec(const proto::ModeConfig &mode);
// A comma-separated list of specs; throws InputError for an empty list, a
// bad spec (naming it), or the same mode twice.
std::vector<proto::ModeConfig> parseModeSpecList(const std::string &text);
// The staleness bound ssp gets when none is given.
constexpr int kDefaultStaleness = 10;

// What a mode spec ends with to divide the learning rate by staleness.
constexpr const char *kStalenessRuleSuffix = "+lr/staleness";

} // namespace parasync
