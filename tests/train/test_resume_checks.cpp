// What a resume is told about its checkpoint (train/resume_checks.h): here the token pipeline
// version trainer_state.json records ("data_pipeline"), against the one this zerotune tokenises
// with (data::kPipelineVersion).
#include <gtest/gtest.h>

#include <string>

#include "core/zt_test_util.h"
#include "data/prepare.h"
#include "io/json.h"
#include "train/resume_checks.h"

namespace zt::train {
namespace {

const std::string kState = "runs/x/checkpoint-2/trainer_state.json";

std::string what_follows(const std::string& then) {
  return "resume_from_checkpoint: " + kState + " " + then +
         ", and this zerotune tokenises with 'zerotune-sft-data-4': the resumed steps see samples "
         "tokenised under the new rule, so their tokens (where the EOS goes, for one) may not be "
         "what the checkpoint's run would have trained on; positions in the data (the samples "
         "each step takes) still line up. Resume with the zerotune that wrote the checkpoint to "
         "keep its tokens";
}

TEST(ResumeChecks, SamePipelineVersionGivesNoWarning) {
  ASSERT_EQ(data::kPipelineVersion, "zerotune-sft-data-4");
  const Json st = {{"data_pipeline", "zerotune-sft-data-4"}, {"global_step", 2}};
  EXPECT_EQ(pipeline_change_warning(st, kState, data::kPipelineVersion), std::nullopt);
}

// A checkpoint of an older pipeline, or of a zerotune that did not record it: a warning naming the
// file, both versions (or that none was recorded) and what it means for the resumed steps.
TEST(ResumeChecks, OtherOrUnrecordedPipelineVersionIsWarnedAbout) {
  EXPECT_EQ(pipeline_change_warning({{"data_pipeline", "zerotune-sft-data-3"}}, kState,
                                    data::kPipelineVersion),
            what_follows("records the token pipeline 'zerotune-sft-data-3'"));
  EXPECT_EQ(pipeline_change_warning({{"global_step", 2}}, kState, data::kPipelineVersion),
            what_follows("records no token pipeline version (written before zerotune recorded "
                         "it)"));
}

TEST(ResumeChecks, PipelineVersionThatIsNoStringIsRefused) {
  EXPECT_EQ(zt::testing::error_of([] {
              pipeline_change_warning({{"data_pipeline", 4}}, kState, data::kPipelineVersion);
            }),
            kState + ": 'data_pipeline' must be a string (the token pipeline version), got 4");
}

}  // namespace
}  // namespace zt::train
