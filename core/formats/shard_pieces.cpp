#include "formats/shard_pieces.h"

#include <algorithm>

namespace parasync {

namespace {

// Floats a row of `table` takes in its values and in its slots, when the
// table is whole rows (ids x width values, ids x k slots); false when not.
bool rowShape(const proto::TableState &table, int64_t *width, int64_t *slotValues)
{
    const int64_t rows = table.ids_size();
    if (rows == 0 || table.values_size() % rows != 0 || table.slots_size() % rows != 0)
        return false;
    *width = table.values_size() / rows;
    *slotValues = table.slots_size() / rows;
    return true;
}

// Rows of `table` a piece carries; 0: the table goes as it is, one piece
// (not whole rows: for the receiver to refuse with its own words rather
// than cut here at a guess).
int64_t rowsPerPiece(const proto::TableState &table, int64_t pieceBytes)
{
    int64_t width = 0;
    int64_t slotValues = 0;
    if (!rowShape(table, &width, &slotValues))
        return 0;
    // A piece's own bytes beyond its rows': the name, and a tag and a length
    // for each of its three packed fields.
    const int64_t framing = 3 * (1 + 10) + 2 + int64_t(table.name().size());
    const int64_t budget = pieceBytes - framing;
    const int64_t rowBytes = int64_t(sizeof(uint64_t)) + int64_t(sizeof(float)) * (width + slotValues);
    return std::max<int64_t>(1, budget / rowBytes);
}

template<typename T>
void append(google::protobuf::RepeatedField<T> *to, google::protobuf::RepeatedField<T> *from)
{
    if (to->empty())
        to->Swap(from);
    else
        to->Add(from->begin(), from->end());
}

} // namespace

bool shardNeedsPieces(const proto::ShardState &shard, int64_t maxMessageBytes)
{
    return int64_t(shard.ByteSizeLong()) > pieceBytesWithin(maxMessageBytes);
}

void takeTableRows(TableStates *tables, TableStates *rows)
{
    rows->Clear();
    for (proto::TableState &table : *tables) {
        proto::TableState *moved = rows->Add();
        moved->set_name(table.name());
        moved->mutable_ids()->Swap(table.mutable_ids());
        moved->mutable_values()->Swap(table.mutable_values());
        moved->mutable_slots()->Swap(table.mutable_slots());
    }
}

int64_t rowPieceCount(const TableStates &tables, int64_t pieceBytes)
{
    int64_t pieces = 0;
    for (const proto::TableState &table : tables) {
        if (table.ids_size() == 0)
            continue;
        const int64_t rows = rowsPerPiece(table, pieceBytes);
        pieces += rows == 0 ? 1 : (table.ids_size() + rows - 1) / rows;
    }
    return pieces;
}

bool forEachRowPiece(const TableStates &tables, int64_t pieceBytes,
                     const std::function<bool(proto::TableState &)> &emit)
{
    for (const proto::TableState &table : tables) {
        if (table.ids_size() == 0)
            continue;
        const int64_t rows = rowsPerPiece(table, pieceBytes);
        if (rows == 0) {
            proto::TableState whole = table;
            if (!emit(whole))
                return false;
            continue;
        }
        const int64_t width = table.values_size() / table.ids_size();
        const int64_t slotValues = table.slots_size() / table.ids_size();
        proto::TableState piece;
        for (int64_t first = 0; first < table.ids_size(); first += rows) {
            const int64_t last = std::min<int64_t>(table.ids_size(), first + rows);
            piece.Clear();
            piece.set_name(table.name());
            piece.mutable_ids()->Add(table.ids().begin() + first, table.ids().begin() + last);
            piece.mutable_values()->Add(table.values().begin() + first * width, table.values().begin() + last * width);
            piece.mutable_slots()->Add(table.slots().begin() + first * slotValues,
                                       table.slots().begin() + last * slotValues);
            if (!emit(piece))
                return false;
        }
    }
    return true;
}

std::string addRowPiece(TableStates *tables, proto::TableState &&piece)
{
    const auto table = std::find_if(tables->begin(), tables->end(),
                                    [&](const proto::TableState &t) { return t.name() == piece.name(); });
    if (table == tables->end())
        return "rows of table '" + piece.name()
               + "', which the first message did not name: send every table's name (and slot_names) in the first "
                 "message, its rows in the later ones";
    int64_t width = 0;
    int64_t slotValues = 0;
    if (!rowShape(piece, &width, &slotValues))
        return "a piece of table '" + piece.name() + "' with " + std::to_string(piece.ids_size()) + " ids, "
               + std::to_string(piece.values_size()) + " values and " + std::to_string(piece.slots_size())
               + " slot values: send whole rows, at least one";
    if (table->ids_size() > 0) {
        if (table->values_size() != table->ids_size() * width || table->slots_size() != table->ids_size() * slotValues)
            return "a piece of table '" + piece.name() + "' whose rows are " + std::to_string(width) + " values and "
                   + std::to_string(slotValues) + " slot values wide, unlike the rows before it";
        if (piece.ids(0) <= table->ids(table->ids_size() - 1))
            return "a piece of table '" + piece.name() + "' starting at id " + std::to_string(piece.ids(0))
                   + ", not after the last id before it (" + std::to_string(table->ids(table->ids_size() - 1))
                   + "): send the pieces in id order";
    }
    append(table->mutable_ids(), piece.mutable_ids());
    append(table->mutable_values(), piece.mutable_values());
    append(table->mutable_slots(), piece.mutable_slots());
    return {};
}

} // namespace parasync
