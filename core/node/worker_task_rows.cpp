// WorkerTask: a sparse model's table rows -- each table's ids split by the ps
// task that holds them, the rows of the next batch asked for with this
// step's push and joined from every ps task's answer, and a pull outside the
// step (after a join; the chief's held-out data).

#include "node/worker_task.h"

#include "base/error.h"
#include "node/worker_ps_connection.h"

#include <algorithm>
#include <numeric>

namespace parasync {

std::vector<std::vector<uint64_t>> WorkerTask::touchedIds(const std::vector<int64_t> &batch) const
{
    return m_model->touchedIds(m_data, batch);
}

void WorkerTask::addPulls(int ps, const std::vector<std::vector<uint64_t>> &ids,
                          google::protobuf::RepeatedPtrField<proto::RowRequest> *out) const
{
    const int numPs = int(m_ps.size());
    for (size_t t = 0; t < ids.size(); ++t) {
        proto::RowRequest *request = nullptr;
        for (const uint64_t id : ids[t]) {
            if (psOfRow(id, numPs) != ps)
                continue;
            if (!request) {
                request = out->Add();
                request->set_table(int(t));
            }
            request->add_ids(id);
        }
    }
}

void WorkerTask::addRowGradients(int ps, google::protobuf::RepeatedPtrField<proto::SparseRows> *out) const
{
    const int numPs = int(m_ps.size());
    for (size_t t = 0; t < m_rowGradient.size(); ++t) {
        const RowBlock &block = m_rowGradient[t];
        const size_t width = size_t(m_tables[t].rowWidth);
        proto::SparseRows *rows = nullptr;
        for (size_t i = 0; i < block.ids.size(); ++i) {
            if (psOfRow(block.ids[i], numPs) != ps)
                continue;
            if (!rows) {
                rows = out->Add();
                rows->set_table(int(t));
            }
            rows->add_ids(block.ids[i]);
            const float *values = block.values.data() + i * width;
            rows->mutable_values()->Add(values, values + width);
        }
    }
}

void WorkerTask::readRows(const std::vector<const google::protobuf::RepeatedPtrField<proto::SparseRows> *> &answers,
                          const std::vector<std::vector<uint64_t>> &ids, RowBlocks *rows) const
{
    rows->resize(m_tables.size());
    for (size_t t = 0; t < m_tables.size(); ++t) {
        RowBlock &block = (*rows)[t];
        const size_t width = size_t(m_tables[t].rowWidth);
        block.ids = ids[t];
        block.values.assign(block.ids.size() * width, 0.0f);
        // Every ps task answers its share of the ids ascending; each row
        // goes to its id's place in the whole list.
        size_t found = 0;
        for (const auto *answer : answers) {
            for (const proto::SparseRows &part : *answer) {
                if (size_t(part.table()) != t)
                    continue;
                if (size_t(part.values_size()) != size_t(part.ids_size()) * width)
                    throw InputError("a ps task answered " + std::to_string(part.values_size()) + " values for "
                                     + std::to_string(part.ids_size()) + " rows of table '" + m_tables[t].name
                                     + "', whose rows are " + std::to_string(width) + " wide");
                for (int i = 0; i < part.ids_size(); ++i) {
                    const auto at = std::lower_bound(block.ids.begin(), block.ids.end(), part.ids(i));
                    if (at == block.ids.end() || *at != part.ids(i))
                        throw InputError("a ps task answered row " + std::to_string(part.ids(i)) + " of table '"
                                         + m_tables[t].name + "', which this worker did not ask for");
                    std::copy_n(part.values().data() + size_t(i) * width, width,
                                block.values.data() + size_t(at - block.ids.begin()) * width);
                    ++found;
                }
            }
        }
        if (found != block.ids.size())
            throw InputError("the ps tasks answered " + std::to_string(found) + " of the "
                             + std::to_string(block.ids.size()) + " rows of table '" + m_tables[t].name
                             + "' this worker asked for");
    }
}

std::vector<proto::PullRequest> WorkerTask::pullsOf(
    const google::protobuf::RepeatedPtrField<proto::RowRequest> &requests, bool lookupOnly) const
{
    // The ps refuses a pull whose answer (an id and its row a row) would not
    // fit --max_message_bytes; half of it leaves room for the rest of the
    // answer. A step's batch fits (the worker checks at start); the chief's
    // held-out data may touch many times more rows.
    const int64_t budget = std::max<int64_t>(1, m_rpc.maxMessageBytes / 2);
    std::vector<proto::PullRequest> pulls(1);
    pulls.back().set_lookup_only(lookupOnly);
    int64_t bytes = 0;
    for (const proto::RowRequest &request : requests) {
        const int64_t rowBytes
            = int64_t(sizeof(uint64_t)) + int64_t(sizeof(float)) * m_tables[size_t(request.table())].rowWidth;
        proto::RowRequest *block = nullptr;
        for (const uint64_t id : request.ids()) {
            if (bytes > 0 && bytes + rowBytes > budget) {
                pulls.emplace_back().set_lookup_only(lookupOnly);
                bytes = 0;
                block = nullptr;
            }
            if (!block) {
                block = pulls.back().add_tables();
                block->set_table(request.table());
            }
            block->add_ids(id);
            bytes += rowBytes;
        }
    }
    return pulls;
}

bool WorkerTask::pullRows(const std::vector<std::vector<uint64_t>> &ids, bool lookupOnly, RowBlocks *rows)
{
    std::vector<std::vector<proto::PullRequest>> pulls(m_ps.size());
    size_t rounds = 0;
    for (size_t k = 0; k < m_ps.size(); ++k) {
        google::protobuf::RepeatedPtrField<proto::RowRequest> requests;
        addPulls(int(k), ids, &requests);
        pulls[k] = pullsOf(requests, lookupOnly);
        rounds = std::max(rounds, pulls[k].size());
    }
    // One pull at a time on each stream, every ps task's at once: a stream
    // never holds answers nobody reads while its pulls wait to be sent.
    std::vector<std::vector<proto::TrainResponse>> answers(m_ps.size());
    for (size_t round = 0; round < rounds; ++round) {
        for (size_t k = 0; k < m_ps.size(); ++k) {
            if (round >= pulls[k].size())
                continue;
            proto::TrainRequest request;
            *request.mutable_pull() = std::move(pulls[k][round]);
            if (!m_ps[k]->stream->write(request))
                return false;
        }
        for (size_t k = 0; k < m_ps.size(); ++k) {
            if (round >= pulls[k].size())
                continue;
            proto::TrainResponse &answer = answers[k].emplace_back();
            if (!m_ps[k]->stream->read(&answer) || !answerIsCurrent(*m_ps[k], answer))
                return false;
            if (!answer.has_pull())
                throw InputError("ps:" + std::to_string(k)
                                 + " answered a pull with something else: give every task the "
                                   "same Parasync version");
        }
    }
    std::vector<const google::protobuf::RepeatedPtrField<proto::SparseRows> *> parts;
    for (const auto &fromPs : answers)
        for (const proto::TrainResponse &answer : fromPs)
            parts.push_back(&answer.pull().rows());
    readRows(parts, ids, rows);
    return true;
}

RowBlocks WorkerTask::initialRows(const std::vector<std::vector<uint64_t>> &ids) const
{
    RowBlocks rows(m_tables.size());
    for (size_t t = 0; t < m_tables.size(); ++t) {
        const size_t width = size_t(m_tables[t].rowWidth);
        rows[t].ids = ids[t];
        rows[t].values.resize(ids[t].size() * width);
        for (size_t i = 0; i < ids[t].size(); ++i)
            initialRow(m_tables[t], ids[t][i], {rows[t].values.data() + i * width, width});
    }
    return rows;
}

} // namespace parasync
