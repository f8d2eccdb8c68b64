#pragma once

// The JSON that TF_CONFIG and a cluster file share, read the same way by
// both parsers (cluster_spec.cpp, cluster_file.cpp). Not for other readers.

#include "config/cluster_spec.h"

#include <QJsonDocument>
#include <QJsonObject>

#include <string>

namespace parasync {

// `json` as a JSON object; an InputError naming `origin` and the offset
// otherwise.
QJsonDocument parseJson(const std::string &json, const std::string &origin);

// TF_CONFIG's and the cluster file's "cluster" object. TF 2 lists the chief
// as its own job; Parasync's chief is worker:0, so it goes first.
struct ParsedCluster
{
    ClusterSpec spec;
    bool hasChief = false;
    int tfWorkerCount = 0;
};
ParsedCluster parseClusterObject(const QJsonObject &root, const std::string &origin);

} // namespace parasync
