// PsTask: the rows of a sparse model's tables -- a push's row gradients
// checked and applied, the rows a push or a pull asks for gathered (made on
// their first touch, and recorded for the backup), and what each table holds
// here reported.

#include "node/ps_task.h"

#include <algorithm>

namespace parasync {

namespace {

// Ids and values, as they cross the wire (fixed64 ids, float values).
int64_t wireBytesOf(int64_t rows, int64_t rowWidth)
{
    return rows * int64_t(sizeof(uint64_t) + sizeof(float) * size_t(rowWidth));
}

} // namespace

RowGradientView PsTask::parseRowGradients(const proto::PushRequest &push, std::string *error) const
{
    if (push.row_gradients_size() == 0 && push.pull_size() == 0)
        return {};
    if (m_tables.empty()) {
        *error = "the push carries rows of tables, but the cluster's model has none: send row_gradients and pull "
                 "only for a model that declares tables";
        return {};
    }
    const int numPs = m_options.cluster.numPs();
    const int self = m_options.task.index;
    if (std::string problem = rowBlocksProblem(push.row_gradients(), m_tables, self, numPs, "row_gradients");
        !problem.empty()) {
        *error = std::move(problem);
        return {};
    }
    for (const proto::SparseRows &block : push.row_gradients()) {
        const SparseTable &table = m_shard.table(block.table());
        if (const std::vector<uint64_t> missing = table.notHeld({block.ids().data(), size_t(block.ids_size())});
            !missing.empty()) {
            *error = "row_gradients ('" + table.declaration().name + "'): row " + std::to_string(missing.front())
                     + " was never pulled from " + psName()
                     + ": pull a row (PushRequest.pull or a PullRequest) before pushing its gradient";
            return {};
        }
    }
    return viewOf(push.row_gradients());
}

std::string PsTask::pullProblem(const google::protobuf::RepeatedPtrField<proto::RowRequest> &requests) const
{
    if (requests.empty())
        return {};
    if (m_tables.empty())
        return "rows of tables asked for (pull), but the cluster's model has none";
    if (std::string problem
        = rowRequestsProblem(requests, m_tables, m_options.task.index, m_options.cluster.numPs(), "pull");
        !problem.empty())
        return problem;
    // The answer must fit a message, as every other answer here.
    int64_t bytes = 0;
    for (const proto::RowRequest &request : requests)
        bytes += wireBytesOf(request.ids_size(), m_tables[size_t(request.table())].rowWidth);
    if (bytes > m_rpc.maxMessageBytes)
        return "the rows asked for take " + std::to_string(bytes)
               + " bytes, more than --max_message_bytes=" + std::to_string(m_rpc.maxMessageBytes)
               + ": ask for fewer rows at once (a smaller --batch_size), or give every task a larger "
                 "--max_message_bytes";
    return {};
}

void PsTask::gatherRowsLocked(const google::protobuf::RepeatedPtrField<proto::RowRequest> &requests, bool lookupOnly,
                              google::protobuf::RepeatedPtrField<proto::SparseRows> *out)
{
    if (requests.empty())
        return;
    // Rows made now are recorded first, so the backup holds every row a
    // worker may push a gradient for once this answer is out.
    proto::PullRequest made;
    if (m_follower && !lookupOnly) {
        for (const proto::RowRequest &request : requests) {
            const SparseTable &table = m_shard.table(request.table());
            const std::vector<uint64_t> fresh = table.notHeld({request.ids().data(), size_t(request.ids_size())});
            if (fresh.empty())
                continue;
            proto::RowRequest *rows = made.add_tables();
            rows->set_table(request.table());
            rows->mutable_ids()->Add(fresh.begin(), fresh.end());
        }
    }
    m_shard.gatherRows(requests, lookupOnly, out);
    if (made.tables_size() > 0) {
        proto::ReplicaRecord record;
        *record.mutable_rows_made() = std::move(made);
        recordLocked(std::move(record));
    }
    if (!lookupOnly && !m_replaying) // a backup's replay counts nothing a worker pulled from it
        for (const proto::RowRequest &request : requests) {
            TableMeters &meters = m_tableMeters[size_t(request.table())];
            meters.rowsPulled += request.ids_size();
            meters.wireBytes += wireBytesOf(request.ids_size(), m_tables[size_t(request.table())].rowWidth);
            if (meters.pulls++ % TableMeters::kHotIdsEvery == 0)
                meters.hot.add({request.ids().data(), size_t(request.ids_size())});
        }
}

CallStatus PsTask::pullLocked(const proto::PullRequest &pull, proto::PullResponse *response)
{
    if (!m_initialized)
        return CallStatus::failedPrecondition(
            "rows pulled before the chief initialised the variables: join again and wait until it is ready");
    if (std::string problem = pullProblem(pull.tables()); !problem.empty())
        return CallStatus::invalidArgument(std::move(problem));
    gatherRowsLocked(pull.tables(), pull.lookup_only(), response->mutable_rows());
    response->set_global_step(m_policy ? m_policy->globalStep() : m_updatesApplied);
    return {};
}

void PsTask::applyRowsLocked(const RowGradientView &rows, float learningRateScale)
{
    m_shard.applyRows(rows, learningRateScale);
    for (const TableRowsView &block : rows) {
        TableMeters &meters = m_tableMeters[size_t(block.table)];
        meters.rowsPushed += int64_t(block.rows.ids.size());
        meters.wireBytes += wireBytesOf(int64_t(block.rows.ids.size()), m_tables[size_t(block.table)].rowWidth);
    }
}

std::vector<proto::TableStatus> PsTask::tableStatusLocked() const
{
    constexpr size_t kHotIdsShown = 16;
    constexpr size_t kNormsShown = 256;
    std::vector<proto::TableStatus> tables;
    for (int t = 0; t < m_shard.tableCount(); ++t) {
        const SparseTable &table = m_shard.table(t);
        const TableMeters &meters = m_tableMeters[size_t(t)];
        proto::TableStatus status;
        status.set_name(table.declaration().name);
        status.set_rows(table.rows());
        status.set_payload_bytes(int64_t(table.payloadBytes()));
        status.set_memory_bytes(int64_t(table.memoryBytes()));
        status.set_rows_pulled(meters.rowsPulled);
        status.set_rows_pushed(meters.rowsPushed);
        status.set_wire_bytes(meters.wireBytes);
        status.set_updates(m_policy ? m_policy->globalStep() : m_updatesApplied);
        // Counted on one pull in kHotIdsEvery: scaled back to all pulls,
        // never past the pulls there were.
        const int64_t pulls = meters.pulls;
        const auto scaled = [pulls](int64_t count) { return std::min(count * TableMeters::kHotIdsEvery, pulls); };
        for (const HotIds::Entry &entry : meters.hot.top(kHotIdsShown)) {
            proto::HotId *hot = status.add_hot_ids();
            hot->set_id(entry.id);
            hot->set_count(scaled(entry.count));
            hot->set_error(scaled(entry.error));
        }
        for (const float norm : table.rowNorms(kNormsShown))
            status.add_row_norms(norm);
        tables.push_back(std::move(status));
    }
    return tables;
}

} // namespace parasync
