#include "formats/tensorboard_plugins.h"

#include "base/error.h"
#include "base/qt_text.h"
#include "config/update_modes.h"

#include <QJsonDocument>
#include <QJsonObject>

namespace parasync {

namespace {

// The hparams plugin's data goes in the metadata; the value itself is
// TensorBoard's placeholder, an empty float vector (metadata.NULL_TENSOR).
tensorboard::Summary::Value hparamsValue(const std::string &tag, const tensorboard::HParamsPluginData &data)
{
    tensorboard::Summary::Value value;
    value.set_tag(tag);
    auto *plugin = value.mutable_metadata()->mutable_plugin_data();
    plugin->set_plugin_name(tensorboard_plugins::kHParams);
    plugin->set_content(data.SerializeAsString());
    auto *tensor = value.mutable_tensor();
    tensor->set_dtype(tensorboard::DT_FLOAT);
    tensor->mutable_tensor_shape()->add_dim()->set_size(0);
    return value;
}

} // namespace

tensorboard::Event hparamsEvent(const std::string &trainingJson, double wallTime,
                                const std::vector<std::string> &metricTags)
{
    QJsonParseError error{};
    const QJsonDocument document = QJsonDocument::fromJson(QByteArray::fromStdString(trainingJson), &error);
    if (!document.isObject())
        throw InputError("the training flags are not a JSON object: " + ss(error.errorString()));
    const QJsonObject flags = document.object();

    tensorboard::HParamsPluginData session;
    auto *start = session.mutable_session_start_info();
    start->set_start_time_secs(wallTime);
    tensorboard::HParamsPluginData experiment;
    auto *declared = experiment.mutable_experiment();
    declared->set_description("The parasync-node training flags of this run (cluster.json's \"training\").");
    declared->set_time_created_secs(wallTime);
    for (auto it = flags.begin(); it != flags.end(); ++it) {
        const std::string name = ss(it.key());
        if (name == "logdir") {
            // A path, not a setting to compare runs by.
            start->set_model_uri(ss(it.value().toString()));
            continue;
        }
        google::protobuf::Value hparam;
        auto *info = declared->add_hparam_infos();
        info->set_name(name);
        info->set_display_name("--" + name);
        if (it.value().isDouble()) {
            hparam.set_number_value(it.value().toDouble());
            info->set_type(tensorboard::DATA_TYPE_FLOAT64);
        } else {
            hparam.set_string_value(ss(it.value().toVariant().toString()));
            info->set_type(tensorboard::DATA_TYPE_STRING);
        }
        (*start->mutable_hparams())[name] = hparam;
    }
    for (const std::string &tag : metricTags)
        declared->add_metric_infos()->mutable_name()->set_tag(tag);

    tensorboard::Event event;
    event.set_wall_time(wallTime);
    event.set_step(0);
    *event.mutable_summary()->add_value() = hparamsValue(tensorboard_plugins::kExperimentTag, experiment);
    *event.mutable_summary()->add_value() = hparamsValue(tensorboard_plugins::kSessionStartTag, session);
    return event;
}

tensorboard::Summary::Value textValue(const std::string &tag, const std::string &text)
{
    tensorboard::Summary::Value value;
    value.set_tag(tag);
    auto *plugin = value.mutable_metadata()->mutable_plugin_data();
    plugin->set_plugin_name(tensorboard_plugins::kText);
    plugin->set_content(tensorboard::TextPluginData().SerializeAsString());
    auto *tensor = value.mutable_tensor();
    tensor->set_dtype(tensorboard::DT_STRING);
    tensor->mutable_tensor_shape(); // rank 0: one string
    tensor->add_string_val(text);
    return value;
}

std::string describeModeChange(const proto::ModeChangeEvent &change)
{
    std::string text = describeMode(change.previous()) + " \u2192 " + describeMode(change.current())
                       + " at global step " + std::to_string(change.global_step());
    if (!change.requested_by().empty())
        text += " (requested by " + change.requested_by() + ")";
    return text;
}

} // namespace parasync
