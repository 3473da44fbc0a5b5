// json::Writer, the one way ggufkit and its CLI build JSON: commas and nesting, every value kind,
// and the lossy flag for strings that were not UTF-8.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "ggufkit/json.h"
#include "ggufkit/value.h"

namespace ggufkit {
namespace {

TEST(JsonWriter, NestingAndCommas) {
  std::string out;
  json::Writer w(out);
  w.begin_object().member("a", uint64_t{18446744073709551615u}).member("b", int64_t{-3});
  w.key("c").begin_array().value(true).value(false).null().begin_array().end_array().begin_object().end_object();
  w.end_array();
  w.key("d").begin_object().member("e", "x\"y\n").end_object();
  w.member("f", 1.5).member("g", 0.1f).key("h").raw("[1,2]").end_object();
  EXPECT_EQ(out, R"({"a":18446744073709551615,"b":-3,"c":[true,false,null,[],{}],"d":{"e":"x\"y\n"},)"
                 R"("f":1.5,"g":0.1,"h":[1,2]})");
}

TEST(JsonWriter, TopLevelArrayOfObjects) {
  std::string out;
  json::Writer w(out);
  w.begin_array();
  for (int i = 0; i < 3; ++i) w.begin_object().member("i", i).end_object();
  w.end_array();
  EXPECT_EQ(out, R"([{"i":0},{"i":1},{"i":2}])");
}

TEST(JsonWriter, ValuesAndTheLossyFlag) {
  std::string out;
  json::Writer w(out);
  const MetadataValue good = MetadataValue::string("ok");
  const MetadataValue bad = MetadataValue::string(std::string("a\xff" "b"));
  w.begin_array().value(good.view());
  EXPECT_FALSE(w.take_lossy());
  w.value(bad.view());
  EXPECT_TRUE(w.take_lossy());
  EXPECT_FALSE(w.take_lossy()) << "taking the flag clears it";
  w.value(MetadataValue::of<uint32_t>(7).view()).end_array();
  EXPECT_EQ(out, "[\"ok\",\"a\xEF\xBF\xBD" "b\",7]");
}

}  // namespace
}  // namespace ggufkit
