#pragma once

// What TensorBoard's plugins read beside the scalars: the run's training
// flags as the hparams plugin's data (a session's start and the experiment's
// hyperparameters, as tensorboard.plugins.hparams.summary writes them), and a
// line of text for the text plugin (tensorboard.plugins.text.summary), which
// the chief writes at each mode change. Plain functions that build messages.

#include "proto/parasync.pb.h"
#include "proto/tensorboard.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace parasync {

namespace tensorboard_plugins {
inline constexpr const char *kHParams = "hparams";
inline constexpr const char *kText = "text";
// The tags the hparams plugin looks its data up under.
inline constexpr const char *kExperimentTag = "_hparams_/experiment";
inline constexpr const char *kSessionStartTag = "_hparams_/session_start_info";
// The text summary of a mode change.
inline constexpr const char *kModeChangeTag = "mode_change";
} // namespace tensorboard_plugins

// The Event, at global step 0 and `wallTime`, that declares the run's
// hyperparameters: every training flag of `trainingJson` (TrainingOptions::
// toJson) but the --logdir, which is the session's model URI, numbers as
// numbers, the rest as strings; and the experiment naming each flag with its
// type and each of `metricTags` (scalar tags, "loss", "heldout/accuracy").
// Throws InputError when `trainingJson` is not a JSON object.
tensorboard::Event hparamsEvent(const std::string &trainingJson, double wallTime,
                                const std::vector<std::string> &metricTags);

// A text summary value: `text` as a scalar DT_STRING tensor under `tag`,
// marked for the text plugin.
tensorboard::Summary::Value textValue(const std::string &tag, const std::string &text);

// A mode change in words, as its text summary says it: "async → sync
// (replicas_to_aggregate=2, ...) at global step 300 (requested by parasync app)".
std::string describeModeChange(const proto::ModeChangeEvent &change);

} // namespace parasync
