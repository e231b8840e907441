"""The Lua scripts of a layout-3 index (featurehash.store.index.compact.keys): one call carries a batch packed by
numpy (fixed-width blobs read with string.sub and struct.unpack, which Redis's Lua provides), so Redis
loops over thousands of items and bucket operations where redis-py would pay ~20 us a command.

Every script is given the index's meta key as KEYS[1] (the slot a cluster client routes it to) and
derives the other keys from its prefix: all of them carry the index's {name} hash tag, so they lie
on that slot. Writers check the meta key's SHA-1 first: nothing is written under a deleted index.
"""

_PRELUDE = """
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - 4)
local function chunk_slot(number, chunk, width)
  return prefix .. 'r' .. struct.pack('>I4', math.floor(number / chunk)), (number % chunk) * width
end
local function tail_slot(number)
  return prefix .. 't' .. struct.pack('>I4', math.floor(number / 64)), number % 64
end
"""

# id -> number of each id, and the records of those stored. ARGV: id partitions (u32 BE each), id
# lengths (u32 LE each), the ids, record width, chunk items. Returns {numbers (u32 LE, 0: absent), records}.
LOOKUP = _PRELUDE + """
local parts, lens, ids = ARGV[1], ARGV[2], ARGV[3]
local width, chunk = tonumber(ARGV[4]), tonumber(ARGV[5])
local numbers, records, at = {}, {}, 1
for i = 0, #parts / 4 - 1 do
  local len = struct.unpack('<I4', lens, 4 * i + 1)
  local stored = redis.call('HGET', prefix .. 'u' .. string.sub(parts, 4 * i + 1, 4 * i + 4),
                            string.sub(ids, at, at + len - 1))
  at = at + len
  local number = tonumber(stored) or 0
  numbers[#numbers + 1] = struct.pack('<I4', number)
  if number > 0 then
    local key, offset = chunk_slot(number, chunk, width)
    records[#records + 1] = redis.call('GETRANGE', key, offset, offset + width - 1)
  end
end
return {table.concat(numbers), table.concat(records)}
"""

# Records and tails (vector bytes + id) by number. ARGV: numbers (u32 LE), width, chunk items.
# Returns {records (zeros where none), tails ('' where the number holds no item)}.
RECORDS = _PRELUDE + """
local numbers, width, chunk = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local records, tails = {}, {}
for i = 0, #numbers / 4 - 1 do
  local number = struct.unpack('<I4', numbers, 4 * i + 1)
  local key, offset = chunk_slot(number, chunk, width)
  local record = redis.call('GETRANGE', key, offset, offset + width - 1)
  if #record < width then record = string.rep('\\0', width) end
  records[i + 1] = record
  local tkey, tfield = tail_slot(number)
  tails[i + 1] = redis.call('HGET', tkey, tfield) or ''
end
return {table.concat(records), tails}
"""

# The tails (vector bytes + id, zero-padded to whole 4-byte words) of numbers and, if asked, their records: the
# second half of PROBE_FETCH, for candidates a bounded probe left to later calls. ARGV: numbers (u32 LE), record
# width, chunk items, '1' for records. Returns {tail lengths (u32 LE, unpadded), padded tails, records}.
_TAILS_OF = """
local pads = {'', '\\0\\0\\0', '\\0\\0', '\\0'}
local function tails_of(members, width, chunk, with_records)
  local lengths, tails, records = {}, {}, {}
  for i, member in ipairs(members) do  -- an HGET each: grouping by tail hash cost more in Lua than it saved
    local number = struct.unpack('<I4', member)
    local tkey, tfield = tail_slot(number)
    local tail = redis.call('HGET', tkey, tfield) or ''
    lengths[i] = struct.pack('<I4', #tail)
    tails[2 * i - 1], tails[2 * i] = tail, pads[#tail % 4 + 1]  -- padded to whole words, copied once by concat
    if with_records then
      local key, offset = chunk_slot(number, chunk, width)
      local record = redis.call('GETRANGE', key, offset, offset + width - 1)
      if #record < width then record = string.rep('\\0', width) end
      records[i] = record
    end
  end
  return table.concat(lengths), table.concat(tails), table.concat(records)
end
"""

TAILS = _PRELUDE + _TAILS_OF + """
local numbers, members = ARGV[1], {}
for p = 1, #numbers, 4 do members[#members + 1] = string.sub(numbers, p, p + 3) end
local lengths, tails, records = tails_of(members, tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4] == '1')
return {lengths, tails, records}
"""

# A query's probe and, when it fits one call, the candidates' data (one round trip): the members of buckets, per
# query row, each distinct bucket value of a row once (a family of near duplicates fills many of a row's buckets
# with the same members), then each member not in `known` once (first seen first) with its tail and, if asked,
# its record (as TAILS). Its work is bounded, so that no call holds Redis for long whatever the buckets hold:
# - a row takes its buckets in band order until it has walked `cap` members (cap < 0: no cap); a bucket larger
#   than what is left of the cap gives only that many (the first ones SSCAN returns, read by the caller);
# - a call walks at most `budget` members (always at least one bucket) and stops at an address boundary,
#   returning where (the caller sends the next call from there, with the row's walked count);
# - an overflow set of more than `big` members (or one cut by the cap) is not read here: its address and how
#   many members to take go back to the caller, who reads it with SSCAN pages of bounded size;
# - the tails are fetched only when this one call did the whole probe and found at most `tail_budget` new
#   members; otherwise the caller fetches them with TAILS, in calls of at most that many.
# ARGV: 1 addresses, 2 address stride, 3 addresses per row, 4 known numbers (u32 LE), 5 record width, 6 chunk
# items, 7 '1' for records, 8 first address (0-based), 9 members walked by that address's row before it, 10 cap,
# 11 budget, 12 big, 13 tail budget, 14 '1' to fetch the tails if they fit (else the caller fetches them). Returns {numbers (u32 LE), tail lengths (u32 LE, unpadded), padded tails,
# records ('' unless asked), {one member blob per row from the first address's row to the last probed row},
# next address, members walked by its row before it, deferred buckets (address u32 LE, members to take u32 LE),
# 1 if this call did the whole probe and fetched the tails (else the first four are '')}.
PROBE_FETCH = _PRELUDE + _TAILS_OF + """
local addresses, stride, per, known = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local width, chunk, with_records = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7] == '1'
local first, walked, cap = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local budget, big, tail_budget = tonumber(ARGV[11]), tonumber(ARGV[12]), tonumber(ARGV[13])
local sub, pack_u32, call = string.sub, struct.pack, redis.call
local total = #addresses / stride
local track = first == 0 and ARGV[14] == '1'  -- only a call that may fetch the tails gathers the new members
local seen = {}
if track then for p = 1, #known, 4 do seen[sub(known, p, p + 3)] = true end end
local fresh, out, parts, values, deferred = {}, {}, {}, {}, {}
local function note(blob)
  for p = 1, #blob, 4 do
    local member = sub(blob, p, p + 3)
    if not seen[member] then seen[member] = true; fresh[#fresh + 1] = member end
  end
end
local work, i = 0, first
while i < total do
  if i % per == 0 then walked = 0 end
  local left = cap < 0 and math.huge or cap - walked
  if left > 0 then
    local head = sub(addresses, i * stride + 1, i * stride + 5)
    local field = sub(addresses, i * stride + 6, (i + 1) * stride)
    local value = call('HGET', prefix .. 'b' .. head, field)
    if value == '' then
      local set = prefix .. 'o' .. head .. field
      local size = call('SCARD', set)
      local take = math.min(size, left)
      if take > big or take < size then
        deferred[#deferred + 1] = pack_u32('<I4<I4', i, take); track = false
        walked = walked + take
      elseif work > 0 and work + size > budget then
        break
      else
        local members = {}
        for _, member in ipairs(call('SMEMBERS', set)) do members[#members + 1] = pack_u32('<I4', tonumber(member)) end
        value = table.concat(members)
        work, walked = work + size, walked + size
      end
    elseif value then
      if #value / 4 > left then value = sub(value, 1, 4 * left) end
      work, walked = work + #value / 4, walked + #value / 4
    end
    if value and value ~= '' and not values[value] then
      values[value] = true; parts[#parts + 1] = value
      if track then note(value) end
    end
  end
  work = work + 1
  i = i + 1
  if i % per == 0 then out[#out + 1] = table.concat(parts); parts = {}; values = {} end
  if work >= budget then break end
end
if i % per ~= 0 then out[#out + 1] = table.concat(parts) end
local lengths, tails, records, whole = '', '', '', 0
if track and i == total and #fresh <= tail_budget then
  lengths, tails, records = tails_of(fresh, width, chunk, with_records)
  whole = 1
else
  fresh = {}
end
return {table.concat(fresh), lengths, tails, records, out, i, walked, table.concat(deferred), whole}
"""

# Item numbers for n new items: removed ones first (P free), then INCRBY P next. KEYS: meta, next,
# free. ARGV: the meta's SHA-1, n. Returns n numbers (u32 LE), or false if the meta changed.
ALLOCATE = """
if redis.sha1hex(redis.call('GET', KEYS[1]) or '') ~= ARGV[1] then return false end
local n = tonumber(ARGV[2])
local reused = redis.call('LPOP', KEYS[3], n) or {}
local out = {}
for _, number in ipairs(reused) do out[#out + 1] = struct.pack('<I4', tonumber(number)) end
local rest = n - #reused
if rest > 0 then
  local top = redis.call('INCRBY', KEYS[2], rest)
  if top > 4294967295 then return redis.error_reply('ERR the index has given out 2^32 - 1 item numbers') end
  for number = top - rest + 1, top do out[#out + 1] = struct.pack('<I4', number) end
end
return table.concat(out)
"""

# Adds ('a') or removes ('r') a batch of items, if the index and the items are as the caller read
# them: else -1 (meta changed) or -2 (an item changed), and nothing is written. It counts the bytes the batch
# adds or frees (featurehash.store.lsh_accounting) before writing: past the limit (ARGV[19] >= 0) it returns
# {-3, used, needed} and writes nothing; else it adds them to the index's size and the tenant's total and returns
# {items, bytes counted}. KEYS: meta, count, free, size, the tenant's total (standalone Redis; the limit applies
# to it). Without KEYS[5] (a cluster) ARGV[19] is the allowance, what the tenant's other indexes leave of its
# limit, and applies to this index's size.
# ARGV: 1 meta SHA-1, 2 mode, 3 per item 12 bytes (id partition u32 BE, number u32 LE, number read
# u32 LE: 0 when the id was absent), 4 id lengths, 5 ids, 6 the SHA-1 (hex) of each record read,
# 7 new records, 8 tail lengths, 9 tails, 10-14 the bucket changes (CompactLayout.operations: partition
# heads, buckets per head, fields, (leaving, joining) counts as u16 BE pairs, members), 15 record width, 16 chunk items,
# 17 field bytes, 18 count change, 19 the stored-bytes limit or allowance (-1: none). A removal's first write is an HDEL (Redis at
# maxmemory refuses a script's first write only if it may grow memory; deleting must work then).
WRITE = _PRELUDE + """
if redis.sha1hex(redis.call('GET', KEYS[1]) or '') ~= ARGV[1] then return -1 end
local adding, items, lens, ids, shas = ARGV[2] == 'a', ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local width, chunk, fw = tonumber(ARGV[15]), tonumber(ARGV[16]), tonumber(ARGV[17])
local plan, at, read, delta = {}, 1, 0, 0
for i = 0, #items / 12 - 1 do
  local number, old = struct.unpack('<I4<I4', items, 12 * i + 5)
  local len = struct.unpack('<I4', lens, 4 * i + 1)
  local id = string.sub(ids, at, at + len - 1)
  at = at + len
  local ukey = prefix .. 'u' .. string.sub(items, 12 * i + 1, 12 * i + 4)
  local stored = redis.call('HGET', ukey, id)
  if old == 0 then
    if stored then return -2 end
  else
    if tonumber(stored) ~= old then return -2 end
    local key, offset = chunk_slot(old, chunk, width)
    read = read + 1
    local record = redis.call('GETRANGE', key, offset, offset + width - 1)
    if redis.sha1hex(record) ~= string.sub(shas, 40 * read - 39, 40 * read) then return -2 end
  end
  plan[i + 1] = {ukey, id, number, old}
  local tkey, tfield = tail_slot(number)
  local stored_tail = old == 0 and 0 or redis.call('HSTRLEN', tkey, tfield)
  if adding then
    local tail = struct.unpack('<I4', ARGV[8], 4 * i + 1)
    delta = delta + tail - stored_tail + (old == 0 and width + len + 4 or 0)
  else
    delta = delta - stored_tail - width - len - 4
  end
end
for p = 1, #ARGV[13], 4 do
  local l1, l2, j1, j2 = string.byte(ARGV[13], p, p + 3)
  delta = delta + 4 * (j1 * 256 + j2 - l1 * 256 - l2)
end
local limit = tonumber(ARGV[19])
if delta > 0 and limit >= 0 then  -- the tenant's total, or on a cluster this index's count (lsh_accounting)
  local used = tonumber(redis.call('GET', KEYS[5] or KEYS[4]) or '0')
  if used + delta > limit then  -- the new items' numbers (ALLOCATE's) go back to be given again
    for _, item in ipairs(plan) do if item[4] == 0 then redis.call('RPUSH', KEYS[3], item[3]) end end
    return {-3, used, delta}
  end
end
local made, tat = {}, 1
for i, item in ipairs(plan) do
  local ukey, id, number = item[1], item[2], item[3]
  local tkey, tfield = tail_slot(number)
  local key, offset = chunk_slot(number, chunk, width)
  if adding then
    local len = struct.unpack('<I4', ARGV[8], 4 * i - 3)
    redis.call('HSET', ukey, id, number)
    redis.call('HSET', tkey, tfield, string.sub(ARGV[9], tat, tat + len - 1))
    tat = tat + len
    if not made[key] then  -- a chunk is made whole at once: growing it would leave slack
      if redis.call('EXISTS', key) == 0 then redis.call('SETRANGE', key, chunk * width - 1, '\\0') end
      made[key] = true
    end
    redis.call('SETRANGE', key, offset, string.sub(ARGV[7], (i - 1) * width + 1, i * width))
  else
    redis.call('HDEL', ukey, id)
    redis.call('HDEL', tkey, tfield)
    redis.call('SETRANGE', key, offset, string.rep('\\0', width))
    redis.call('RPUSH', KEYS[3], number)
  end
end
local function each_chunk(command, key, list, step)
  local replies = {}
  for s = 1, #list, step do
    local reply = redis.call(command, key, unpack(list, s, math.min(s + step - 1, #list)))
    if type(reply) == 'table' then for _, v in ipairs(reply) do replies[#replies + 1] = v end end
  end
  return replies
end
local heads, sizes, fields, counts, members = ARGV[10], ARGV[11], ARGV[12], ARGV[13], ARGV[14]
local sub, byte, call, unpack_u32 = string.sub, string.byte, redis.call, struct.unpack  -- locals: no global lookups
local af, am, at = 1, 1, 1
local function apply_group(head, size)
  local key, order = prefix .. 'b' .. head, {}
  for x = 1, size do order[x] = sub(fields, af, af + fw - 1); af = af + fw end
  local before = each_chunk('HMGET', key, order, 1000)
  local sets, dels = {}, {}
  for x, field in ipairs(order) do
    local l1, l2, j1, j2 = byte(counts, at, at + 3)
    local leave, join = l1 * 256 + l2, j1 * 256 + j2
    at = at + 4
    local v = before[x]
    if v == '' then
      local set = prefix .. 'o' .. head .. field
      for p = am, am + 4 * leave - 1, 4 do call('SREM', set, (unpack_u32('<I4', members, p))) end
      am = am + 4 * leave
      for p = am, am + 4 * join - 1, 4 do call('SADD', set, (unpack_u32('<I4', members, p))) end
      am = am + 4 * join
      if leave > 0 and call('EXISTS', set) == 0 then dels[#dels + 1] = field end
    else
      if v and leave > 0 then
        for p = am, am + 4 * leave - 1, 4 do
          local member = sub(members, p, p + 3)
          for q = 1, #v, 4 do
            if sub(v, q, q + 3) == member then v = sub(v, 1, q - 1) .. sub(v, q + 4); break end
          end
        end
        if v == '' then v = false end
      end
      am = am + 4 * leave
      if join > 0 then
        local joining = sub(members, am, am + 4 * join - 1)
        if v then v = v .. joining else v = joining end
        if #v > 64 then  -- past hash-max-listpack-value: the bucket moves to a set of its own
          local set = prefix .. 'o' .. head .. field
          for p = 1, #v, 4 do call('SADD', set, (unpack_u32('<I4', v, p))) end
          v = ''
        end
        am = am + 4 * join
      end
      if v ~= before[x] then
        if v then sets[#sets + 1] = field; sets[#sets + 1] = v else dels[#dels + 1] = field end
      end
    end
  end
  each_chunk('HDEL', key, dels, 1000)
  each_chunk('HSET', key, sets, 1000)
end
for g = 0, #heads / 5 - 1 do
  local head, size, done = sub(heads, 5 * g + 1, 5 * g + 5), unpack_u32('<I4', sizes, 4 * g + 1), false
  if size == 1 then  -- a large index's usual case: one bucket of the hash, new: one HSETNX, no read
    local l1, l2, j1, j2 = byte(counts, at, at + 3)
    local join = j1 * 256 + j2
    if l1 + l2 == 0 and join <= 16 and call('HSETNX', prefix .. 'b' .. head, sub(fields, af, af + fw - 1),
                                            sub(members, am, am + 4 * join - 1)) == 1 then
      af, am, at, done = af + fw, am + 4 * join, at + 4, true
    end
  end
  if not done then apply_group(head, size) end
end
local items_now = redis.call('INCRBY', KEYS[2], ARGV[18])
local size = redis.call('INCRBY', KEYS[4], delta)
if size < 0 then delta = delta - size end  -- items written before counting began: never below zero
if size <= 0 then redis.call('DEL', KEYS[4]) end  -- an absent count is 0: an emptied index leaves no key
if KEYS[5] and redis.call('INCRBY', KEYS[5], delta) <= 0 then redis.call('DEL', KEYS[5]) end
return {items_now, delta}
"""
