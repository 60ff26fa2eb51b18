#include <cpdit/core/error.hpp>
#include <cpdit/io/atomic_file.hpp>
#include <cpdit/io/video.hpp>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
}

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

namespace cpdit::io {
namespace {

// The muxer writes into memory and seeks back to patch sizes; the bytes go to disk through an
// AtomicFile once the trailer is written, so a failed encode leaves nothing behind.
struct MemoryOutput {
  std::vector<uint8_t> bytes;
  size_t position = 0;
};

// FFmpeg 6.1 made the buffer of avio's write callback const.
#if LIBAVFORMAT_VERSION_MAJOR >= 61
using PacketBytes = const uint8_t*;
#else
using PacketBytes = uint8_t*;
#endif

int write_packet(void* opaque, PacketBytes data, int size) {
  auto* out = static_cast<MemoryOutput*>(opaque);
  if (out->position + size_t(size) > out->bytes.size()) out->bytes.resize(out->position + size_t(size));
  std::memcpy(out->bytes.data() + out->position, data, size_t(size));
  out->position += size_t(size);
  return size;
}

int64_t seek(void* opaque, int64_t offset, int whence) {
  auto* out = static_cast<MemoryOutput*>(opaque);
  if (whence == AVSEEK_SIZE) return int64_t(out->bytes.size());
  const int64_t base = (whence & ~AVSEEK_FORCE) == SEEK_CUR ? int64_t(out->position)
                       : (whence & ~AVSEEK_FORCE) == SEEK_END ? int64_t(out->bytes.size())
                                                               : 0;
  if (base + offset < 0) return AVERROR(EINVAL);
  out->position = size_t(base + offset);
  return int64_t(out->position);
}

// A negative FFmpeg return code as a one-line io error naming the step.
void check_av(int code, const char* step) {
  if (code >= 0) return;
  char text[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(code, text, sizeof text);
  fail(ErrorKind::io, "writing mp4: ", step, ": ", text);
}

struct FormatDeleter {
  void operator()(AVFormatContext* f) const {
    if (f && f->pb) {
      av_freep(&f->pb->buffer);
      avio_context_free(&f->pb);
    }
    avformat_free_context(f);
  }
};
struct CodecDeleter {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct FrameDeleter {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct PacketDeleter {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct ScaleDeleter {
  void operator()(SwsContext* s) const { sws_freeContext(s); }
};

// Sends `frame` (null: end of stream) and writes every packet the encoder hands back.
void encode(AVCodecContext* codec, AVFrame* frame, AVFormatContext* format, AVStream* stream, AVPacket* packet) {
  check_av(avcodec_send_frame(codec, frame), "encoding a frame");
  for (;;) {
    const int got = avcodec_receive_packet(codec, packet);
    if (got == AVERROR(EAGAIN) || got == AVERROR_EOF) return;
    check_av(got, "receiving a packet");
    // Every frame lasts one tick of 1/fps; without it the muxer guesses the last one's length and
    // the file's rate reads as frames / (frames - 1) too fast.
    packet->duration = 1;
    av_packet_rescale_ts(packet, codec->time_base, stream->time_base);
    packet->stream_index = stream->index;
    check_av(av_interleaved_write_frame(format, packet), "muxing a packet");
  }
}

// Frame f of (F, H, W, 3) f32 in [0, 1] as packed 8-bit RGB.
void frame_to_rgb8(const float* src, int64_t values, int64_t f, uint8_t* rgb) {
  for (int64_t i = 0; i < values; ++i) {
    const float x = src[i];
    CPDIT_CHECK(!std::isnan(x), invalid_argument, "writing mp4: frame ", f, " holds NaN");
    rgb[i] = uint8_t(std::nearbyint(std::clamp(x, 0.0f, 1.0f) * 255.0f));
  }
}

}  // namespace

void write_mp4(const std::string& path, const Tensor& frames_in, int fps) {
  CPDIT_CHECK(frames_in.defined() && frames_in.dim() == 4 && frames_in.size(3) == 3 && frames_in.size(0) >= 1,
              invalid_argument, "an mp4 needs frames (F, H, W, 3), got ",
              frames_in.defined() ? frames_in.describe() : "undefined");
  const int64_t count = frames_in.size(0), height = frames_in.size(1), width = frames_in.size(2);
  CPDIT_CHECK(height >= 2 && width >= 2 && height % 2 == 0 && width % 2 == 0 && height <= 16384 && width <= 16384,
              invalid_argument, "H.264 in 4:2:0 needs an even width and height (up to 16384), got ", width, "x",
              height);
  CPDIT_CHECK(fps >= 1 && fps <= 1000, invalid_argument, "frame rate must be 1 to 1000 frames per second, got ", fps);
  const Tensor frames = frames_in.to(DType::f32).contiguous();

  // Every failure surfaces as one cpdit::Error; FFmpeg's own log lines (x264's statistics included)
  // would only repeat it on stderr.
  av_log_set_level(AV_LOG_QUIET);
  const AVCodec* h264 = avcodec_find_encoder_by_name("libx264");
  CPDIT_CHECK(h264 != nullptr, unsupported,
              "this FFmpeg has no libx264 H.264 encoder; install a libavcodec built with libx264 (Debian's is)");
  AVFormatContext* raw_format = nullptr;
  check_av(avformat_alloc_output_context2(&raw_format, nullptr, "mp4", nullptr), "finding the mp4 muxer");
  std::unique_ptr<AVFormatContext, FormatDeleter> format(raw_format);
  MemoryOutput output;
  constexpr int kIoBuffer = 1 << 16;
  auto* buffer = static_cast<unsigned char*>(av_malloc(kIoBuffer));
  CPDIT_CHECK(buffer != nullptr, io, "writing mp4: out of memory");
  format->pb = avio_alloc_context(buffer, kIoBuffer, 1, &output, nullptr, write_packet, seek);
  if (format->pb == nullptr) av_free(buffer);
  CPDIT_CHECK(format->pb != nullptr, io, "writing mp4: out of memory");

  std::unique_ptr<AVCodecContext, CodecDeleter> codec(avcodec_alloc_context3(h264));
  CPDIT_CHECK(codec != nullptr, io, "writing mp4: out of memory");
  codec->width = int(width);
  codec->height = int(height);
  codec->pix_fmt = AV_PIX_FMT_YUV420P;
  codec->time_base = AVRational{1, fps};
  codec->framerate = AVRational{fps, 1};
  // swscale's default RGB -> YUV is BT.601 limited range; tag it so players convert back the same way.
  codec->colorspace = AVCOL_SPC_SMPTE170M;
  codec->color_range = AVCOL_RANGE_MPEG;
  if (format->oformat->flags & AVFMT_GLOBALHEADER) codec->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  // CRF 18: visually lossless for x264, so the file carries what the model made.
  av_opt_set(codec->priv_data, "crf", "18", 0);
  check_av(avcodec_open2(codec.get(), h264, nullptr), "opening libx264");
  AVStream* stream = avformat_new_stream(format.get(), nullptr);
  CPDIT_CHECK(stream != nullptr, io, "writing mp4: out of memory");
  stream->time_base = codec->time_base;
  check_av(avcodec_parameters_from_context(stream->codecpar, codec.get()), "describing the stream");
  check_av(avformat_write_header(format.get(), nullptr), "writing the header");

  std::unique_ptr<AVFrame, FrameDeleter> frame(av_frame_alloc());
  std::unique_ptr<AVPacket, PacketDeleter> packet(av_packet_alloc());
  CPDIT_CHECK(frame && packet, io, "writing mp4: out of memory");
  frame->format = codec->pix_fmt;
  frame->width = codec->width;
  frame->height = codec->height;
  check_av(av_frame_get_buffer(frame.get(), 0), "allocating a frame");
  std::unique_ptr<SwsContext, ScaleDeleter> scale(sws_getContext(int(width), int(height), AV_PIX_FMT_RGB24,
                                                                 int(width), int(height), AV_PIX_FMT_YUV420P,
                                                                 SWS_BICUBIC, nullptr, nullptr, nullptr));
  CPDIT_CHECK(scale != nullptr, io, "writing mp4: no RGB to YUV 4:2:0 conversion");
  const int64_t values = height * width * 3;
  std::vector<uint8_t> rgb(static_cast<size_t>(values));
  for (int64_t f = 0; f < count; ++f) {
    frame_to_rgb8(frames.data<float>() + f * values, values, f, rgb.data());
    check_av(av_frame_make_writable(frame.get()), "reusing a frame");
    const uint8_t* planes[1] = {rgb.data()};
    const int strides[1] = {int(width * 3)};
    sws_scale(scale.get(), planes, strides, 0, int(height), frame->data, frame->linesize);
    frame->pts = f;
    encode(codec.get(), frame.get(), format.get(), stream, packet.get());
  }
  encode(codec.get(), nullptr, format.get(), stream, packet.get());
  check_av(av_write_trailer(format.get()), "writing the trailer");
  avio_flush(format->pb);

  AtomicFile file(path);
  file.write(output.bytes.data(), output.bytes.size());
  file.commit();
}

}  // namespace cpdit::io
