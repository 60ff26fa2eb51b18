#pragma once
// Decodes a video file back through the FFmpeg libraries (libavformat demuxer, libavcodec decoder,
// libswscale to RGB), so tests check what a player would show. Link the test with PkgConfig::FFMPEG.
#include <cpdit/core/tensor.hpp>

#include <gtest/gtest.h>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libswscale/swscale.h>
}

#include <cstdint>
#include <string>
#include <vector>

namespace cpdit::testing {

struct DecodedVideo {
  std::string codec;  // "h264"
  int width = 0, height = 0;
  double fps = 0;                          // the stream's average frame rate
  std::vector<std::vector<uint8_t>> rgb;  // one packed RGB picture per frame
};

// Fails the test (and returns what it has) when the file does not decode.
inline DecodedVideo read_mp4(const std::string& path) {
  DecodedVideo video;
  AVFormatContext* format = nullptr;
  if (avformat_open_input(&format, path.c_str(), nullptr, nullptr) < 0) {
    ADD_FAILURE() << "FFmpeg cannot open " << path;
    return video;
  }
  const AVCodec* decoder = nullptr;
  const int index = avformat_find_stream_info(format, nullptr) < 0
                        ? -1
                        : av_find_best_stream(format, AVMEDIA_TYPE_VIDEO, -1, -1, &decoder, 0);
  AVCodecContext* codec = index >= 0 ? avcodec_alloc_context3(decoder) : nullptr;
  if (codec == nullptr || avcodec_parameters_to_context(codec, format->streams[index]->codecpar) < 0 ||
      avcodec_open2(codec, decoder, nullptr) < 0) {
    ADD_FAILURE() << path << " has no decodable video stream";
    avcodec_free_context(&codec);
    avformat_close_input(&format);
    return video;
  }
  video.codec = decoder->name;
  video.width = codec->width;
  video.height = codec->height;
  video.fps = av_q2d(format->streams[index]->avg_frame_rate);
  SwsContext* scale = sws_getContext(codec->width, codec->height, codec->pix_fmt, codec->width, codec->height,
                                     AV_PIX_FMT_RGB24, SWS_BICUBIC, nullptr, nullptr, nullptr);
  AVPacket* packet = av_packet_alloc();
  AVFrame* frame = av_frame_alloc();
  auto drain = [&] {
    while (avcodec_receive_frame(codec, frame) >= 0) {
      std::vector<uint8_t> rgb(size_t(video.width) * size_t(video.height) * 3);
      uint8_t* planes[1] = {rgb.data()};
      const int strides[1] = {video.width * 3};
      sws_scale(scale, frame->data, frame->linesize, 0, video.height, planes, strides);
      video.rgb.push_back(std::move(rgb));
    }
  };
  while (av_read_frame(format, packet) >= 0) {
    if (packet->stream_index == index && avcodec_send_packet(codec, packet) >= 0) drain();
    av_packet_unref(packet);
  }
  avcodec_send_packet(codec, nullptr);  // flush the frames the decoder holds back
  drain();
  av_frame_free(&frame);
  av_packet_free(&packet);
  sws_freeContext(scale);
  avcodec_free_context(&codec);
  avformat_close_input(&format);
  return video;
}

// The mean of channel c (0 R, 1 G, 2 B) of a packed RGB picture, in [0, 1].
inline double mean_channel(const std::vector<uint8_t>& rgb, int c) {
  double sum = 0;
  for (size_t i = size_t(c); i < rgb.size(); i += 3) sum += rgb[i];
  return sum / double(rgb.size() / 3) / 255.0;
}

// The MP4 at `path` is `video` ((1, F, H, W, 3) f32 in [0, 1], as diffusers' pipelines return it) at
// Wan's 16 frames per second: H.264, the same size and frame count, and each frame's mean colour per
// channel within 2/255 of the pixels'.
// `fps`: the rate the writer was given (Wan's 16 unless said).
inline void expect_mp4_shows_video(const std::string& path, const cpdit::Tensor& video, double fps = 16.0) {
  const DecodedVideo decoded = read_mp4(path);
  EXPECT_EQ(decoded.codec, "h264");
  EXPECT_EQ(decoded.fps, fps);
  EXPECT_EQ(decoded.width, video.size(3));
  EXPECT_EQ(decoded.height, video.size(2));
  ASSERT_EQ(int64_t(decoded.rgb.size()), video.size(1));
  const int64_t pixels = video.size(2) * video.size(3);
  for (int64_t f = 0; f < video.size(1); ++f)
    for (int c = 0; c < 3; ++c) {
      double sum = 0;
      for (int64_t i = 0; i < pixels; ++i) sum += video.data<float>()[(f * pixels + i) * 3 + c];
      // 2/255: H.264 at CRF 18 through 8-bit BT.601 limited-range 4:2:0 moves a frame's mean colour by
      // up to 1.5 levels on these noisy random-weight frames (the io test's bound); cpdit's decode
      // itself is within 1e-5 of diffusers' sample.
      EXPECT_NEAR(mean_channel(decoded.rgb[size_t(f)], c), sum / double(pixels), 2.0 / 255)
          << "frame " << f << " channel " << c;
    }
}

}  // namespace cpdit::testing
