// opdef.cc — every kernel registration checked against the op's real definition (its OpDef in the
// running TF) before it is made. A kernel whose constraint names an attribute the op lacks makes
// TF's kernel lookup fail for that op on every device, CPU included; one that leaves a type
// attribute free receives dtypes its handler never claimed.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensorflow/c/c_api.h"
#include "udtf.h"

namespace udtf {
namespace {

// The few protobuf wire-format reads an OpDef needs (TF's C API hands it over serialized).
struct Reader {
  const uint8_t* p;
  const uint8_t* end;
  bool ok = true;
  uint64_t varint() {
    uint64_t v = 0;
    for (int s = 0; p < end && s < 64; s += 7) {
      uint8_t b = *p++;
      v |= uint64_t(b & 0x7f) << s;
      if (!(b & 0x80)) return v;
    }
    ok = false;
    return 0;
  }
  bool next(uint32_t* field, uint32_t* wire) {
    if (!ok || p >= end) return false;
    uint64_t key = varint();
    *field = uint32_t(key >> 3);
    *wire = uint32_t(key & 7);
    return ok;
  }
  Reader sub() {
    uint64_t n = varint();
    if (!ok || n > uint64_t(end - p)) return ok = false, Reader{end, end};
    Reader r{p, p + n};
    p += n;
    return r;
  }
  std::string str() {
    Reader r = sub();
    return std::string(reinterpret_cast<const char*>(r.p), size_t(r.end - r.p));
  }
  void skip(uint32_t wire) {
    size_t fixed = wire == 1 ? 8 : wire == 5 ? 4 : 0;
    if (wire == 0) varint();
    else if (wire == 2) sub();
    else if (fixed && size_t(end - p) >= fixed) p += fixed;
    else ok = false;
  }
};

struct AttrDef {
  std::string name, type;
  std::vector<int> allowed;  // empty: any dtype
};
struct OpDef {
  bool found = false;
  std::vector<std::string> args;  // input and output argument names
  std::vector<AttrDef> attrs;
};

// AttrDef.allowed_values (7) is an AttrValue whose list (1) holds the dtypes (6, packed or not).
void read_allowed(Reader value, std::vector<int>* out) {
  for (uint32_t f, w; value.next(&f, &w);) {
    if (f != 1 || w != 2) { value.skip(w); continue; }
    Reader list = value.sub();
    for (uint32_t g, x; list.next(&g, &x);) {
      if (g == 6 && x == 0) out->push_back(int(list.varint()));
      else if (g == 6 && x == 2)
        for (Reader packed = list.sub(); packed.ok && packed.p < packed.end;)
          out->push_back(int(packed.varint()));
      else list.skip(x);
    }
  }
}

// OpDef: name 1, input_arg 2 and output_arg 3 (ArgDef: name 1), attr 4 (AttrDef: name 1, type 2).
OpDef parse(const uint8_t* data, size_t size) {
  OpDef d;
  Reader r{data, data + size};
  for (uint32_t f, w; r.next(&f, &w);) {
    if ((f == 2 || f == 3) && w == 2) {
      Reader arg = r.sub();
      for (uint32_t g, x; arg.next(&g, &x);)
        if (g == 1 && x == 2) d.args.push_back(arg.str());
        else arg.skip(x);
    } else if (f == 4 && w == 2) {
      Reader attr = r.sub();
      AttrDef a;
      for (uint32_t g, x; attr.next(&g, &x);) {
        if (g == 1 && x == 2) a.name = attr.str();
        else if (g == 2 && x == 2) a.type = attr.str();
        else if (g == 7 && x == 2) read_allowed(attr.sub(), &a.allowed);
        else attr.skip(x);
      }
      d.attrs.push_back(a);
    } else {
      r.skip(w);
    }
  }
  d.found = r.ok;
  return d;
}

// TF_InitKernel runs once, on one thread: the cache needs no lock.
const OpDef& lookup(const char* op) {
  static std::map<std::string, OpDef> cache;
  auto it = cache.find(op);
  if (it != cache.end()) return it->second;
  static TF_Graph* graph = TF_NewGraph();
  TF_Buffer* buf = TF_NewBuffer();
  TF_Status* st = TF_NewStatus();
  TF_GraphGetOpDef(graph, op, buf, st);
  OpDef d;
  if (TF_GetCode(st) == TF_OK) d = parse(static_cast<const uint8_t*>(buf->data), buf->length);
  TF_DeleteStatus(st);
  TF_DeleteBuffer(buf);
  return cache[op] = d;
}

}  // namespace

std::string opdef_mismatch(const char* op, const std::vector<std::pair<const char*, int>>& types,
                           const std::vector<const char*>& host) {
  const OpDef& d = lookup(op);
  if (!d.found) return "TensorFlow has no op of this name";
  for (const auto& [name, dtype] : types) {
    auto a = std::find_if(d.attrs.begin(), d.attrs.end(),
                          [&](const AttrDef& x) { return x.name == name; });
    if (a == d.attrs.end() || a->type != "type")
      return std::string("constraint on attr '") + name + "', which is no type attr of the op";
    if (!a->allowed.empty() && std::find(a->allowed.begin(), a->allowed.end(), dtype) ==
                                   a->allowed.end())
      return std::string("attr '") + name + "' does not allow dtype " + std::to_string(dtype);
  }
  for (const AttrDef& a : d.attrs) {
    bool constrained = std::any_of(types.begin(), types.end(),
                                   [&](const auto& t) { return a.name == t.first; });
    if ((a.type == "type" || a.type == "list(type)") && !constrained && a.allowed.size() != 1)
      return "type attr '" + a.name + "' of the op is left unconstrained";
  }
  for (const char* h : host)
    if (std::find(d.args.begin(), d.args.end(), h) == d.args.end())
      return std::string("host-memory argument '") + h + "' is no argument of the op";
  return "";
}

}  // namespace udtf
