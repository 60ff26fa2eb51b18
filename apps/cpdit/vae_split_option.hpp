#pragma once
// --vae-split, which `decode`, `generate` and `forward` share: how their ranks split a VAE decode.
#include <cpdit/models/vae/autoencoder_kl_wan.hpp>

#include <CLI/CLI.hpp>

#include <map>
#include <string>

namespace cpdit::app {

inline CLI::Option* add_vae_split_option(CLI::App* cmd, models::vae::VideoSplit& split) {
  using models::vae::VideoSplit;
  const std::map<std::string, VideoSplit> names{{"rows", VideoSplit::rows}, {"frames", VideoSplit::frames}};
  return cmd
      ->add_option("--vae-split", split,
                   "how the ranks split the VAE decode: rows (default), or frames (Wan's video VAE: each rank decodes "
                   "a run of latent frames whole; at most as many ranks as latent frames take part)")
      ->transform(CLI::CheckedTransformer(names).description(""))
      ->type_name("{rows,frames}");  // the words, not CLI11's "ENUM:value in {frames->1,rows->0}"
}

}  // namespace cpdit::app
